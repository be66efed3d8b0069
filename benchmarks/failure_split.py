"""Which half of the second failure corpus a case belongs to: decided by its source's URL, before its text is read.

A case whose source URL (fragment removed) hashes to an even first SHA-256 byte is in the `rules` half: the
classifier's patterns may be written from it. An odd first byte puts it in the `held_out` half: no pattern is
written from it, and benchmarks/bench_failures.py scores the classifier on it. Every text quoted from one page
falls in the same half, so a page's wording cannot leak from one half into the other.
"""
from __future__ import annotations

import hashlib
from urllib.parse import urldefrag


def half(url: str) -> str:
    """`rules` or `held_out`, by the first byte of SHA-256 of the URL without its fragment."""
    page = urldefrag(url.strip())[0]
    return "held_out" if hashlib.sha256(page.encode("utf-8")).digest()[0] % 2 else "rules"


if __name__ == "__main__":
    import sys

    for arg in sys.argv[1:]:
        print(half(arg), arg)
