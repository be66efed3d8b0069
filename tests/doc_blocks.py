"""The fenced code blocks of README.md and docs/*.md, for the tests that run them (tests/test_docs_examples.py).

A block opts out of being run only with a first line `# not run: REASON`, visible to every reader."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO

DOC_FILES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
NOT_RUN = re.compile(r"#\s*not run:\s*(?P<reason>\S.*)")


@dataclass(frozen=True)
class Block:
    file: str  # relative to the repository
    line: int  # of the opening fence, 1-based
    lang: str
    heading: str  # the last heading above the block
    text: str

    @property
    def not_run(self) -> str | None:
        """The reason given in the block's `# not run:` first line, or None: the block is run."""
        first = self.text.split("\n", 1)[0].strip()
        match = NOT_RUN.fullmatch(first)
        return match["reason"] if match else None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Every fenced block of one Markdown file, in order."""
    out, fence, body, heading = [], None, [], ""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if fence is None:
            if line.startswith("```"):
                fence, body = (number, line[3:].strip()), []
            elif line.startswith("#"):
                heading = line.lstrip("#").strip()
        elif line.startswith("```"):
            out.append(Block(path.relative_to(REPO).as_posix(), fence[0], fence[1], heading,
                             "\n".join(body) + "\n"))
            fence = None
        else:
            body.append(line)
    assert fence is None, f"{path}:{fence[0]}: a fence that never closes"
    return out


def all_blocks() -> list[Block]:
    return [b for path in DOC_FILES for b in blocks(path)]


def shell_lines(block: Block) -> list[str]:
    """A shell block's commands: each non-blank line without its trailing `  # comment`."""
    lines = []
    for line in block.text.splitlines():
        command = re.split(r"(?:^|\s+)#\s", line, maxsplit=1)[0].strip()
        if command:
            lines.append(command)
    return lines
