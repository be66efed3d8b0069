"""Render the job's source dir from a template set (the shipped templates, or a team's laid over them), plus
the runtime modules (launcher/runtime/: plain Python, linted and tested as such) copied verbatim beside the
entry script, plus the JSON documents the caller hands over (the distribution, the plan, the spec).

Rendering takes what the templates read (the spec and the advisor's decisions), never a plan: the plan calls
this, not the other way round. Every rendered Python file must compile; one that does not is a TemplateError
naming its template.
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from launcher.catalog.architecture import HF_CLASSES
from launcher.catalog.smp import ASYNC_CHECKPOINT_SINCE, carries, requirements
from launcher.core.names import CHECKPOINT_LOCAL_PATH
from launcher.core.sanitize import quoted
from launcher.render import progress
from launcher.render.templates import TemplateError, TemplateSet, py_literal, render, shipped, templates_dir
from launcher.rules.decisions import Decisions
from launcher.spec.models import JobSpec
from launcher.spec.presets import PRESETS
from launcher.spec.secrets import credential_kind

__all__ = ["RUNTIME_MODULES", "SOURCE_TEMPLATES", "hf_config", "py_literal", "render_source", "render_template",
           "runtime_source", "template_context", "template_names", "templates_dir", "write_source_dir"]


def template_names() -> list[str]:
    """The shipped templates' names."""
    return shipped().names


def render_template(name: str, context: Mapping[str, Any], templates: TemplateSet | None = None) -> str:
    """One template (shipped unless a template set is given) rendered with context."""
    return render(templates or shipped(), name, dict(context))


# The source dir: output file -> template. Every file here is uploaded as the job's source_dir.
SOURCE_TEMPLATES = {
    "train.py": "train.py.j2",
    "train_secrets.py": "train_secrets.py.j2",
    "requirements.txt": "requirements.txt.j2",
}
# Modules of launcher.runtime copied verbatim into the source dir under the same file name (the entry
# script imports them as top-level modules). Read as text, never imported here: they need torch.
RUNTIME_MODULES = ("train_data.py", "train_checkpoint.py", "tsm_local.py")


def runtime_source(name: str) -> str:
    """The text of one launcher.runtime module, as the source dir gets it."""
    return resources.files("launcher.runtime").joinpath(name).read_text(encoding="utf-8")


DEFAULT_ROPE_THETA = 10000.0


def hf_config(spec: JobSpec) -> dict[str, Any]:
    """Keyword arguments for the transformers config class: the preset's (or the spec's) dimensions."""
    arch = spec.model.architecture()
    preset = PRESETS.get(spec.model.preset) if spec.model.preset else None
    config: dict[str, Any] = {
        "vocab_size": arch.vocab_size,
        "hidden_size": arch.hidden_width,
        "num_hidden_layers": arch.num_layers,
        "num_attention_heads": arch.num_heads,
        "intermediate_size": arch.intermediate_size,
        "max_position_embeddings": max(spec.model.seq_length, preset.max_position_embeddings if preset else 0),
    }
    if arch.type != "gpt_neox":  # GPT-NeoX has no grouped-query attention; its rotary base is the default
        config["num_key_value_heads"] = arch.num_key_value_heads
        config["rope_theta"] = preset.rope_theta if preset else DEFAULT_ROPE_THETA
    if preset and preset.rope_scaling:
        config["rope_scaling"] = dict(preset.rope_scaling)
    if arch.type in ("mistral", "mixtral"):
        # No sliding window, as AWS's example scripts build both (--sliding_window defaults to None) and as
        # Mistral 7B v0.3 and Mixtral ship: SMP's Mistral runs context parallelism and fp8 only without one
        # (SMP 2.6.0 known issue), and transformers' MistralConfig would otherwise default to 4096.
        config["sliding_window"] = None
    if arch.type == "mixtral":
        config["num_local_experts"] = arch.num_experts
        config["num_experts_per_tok"] = arch.num_experts_per_tok
    config.update(tie_word_embeddings=False, use_cache=False, attn_implementation="sdpa")
    return config


def rope_scaled(spec: JobSpec) -> bool:
    """The model's config carries a rope_scaling (Llama 3.1), which needs a later transformers."""
    preset = PRESETS.get(spec.model.preset) if spec.model.preset else None
    return bool(preset and preset.rope_scaling)


def template_context(spec: JobSpec, decisions: Decisions) -> dict[str, Any]:
    """What the templates may read; spec values stay data here and enter code only through `py` (or `json`).

    The decisions are the plan's (the advisor's), so the script does what `plan` shows.
    """
    arch = spec.model.architecture()
    t = spec.training
    return {
        "description": spec.description,
        "hyperparameters": dict(spec.hyperparameters),
        "secrets": dict(spec.secrets),
        "model": {
            "hf_module": f"transformers.models.{arch.type}.modeling_{arch.type}",
            "hf_classes": HF_CLASSES[arch.type],
            "config": hf_config(spec),
            "pretrained": spec.model.pretrained,
            "seq_length": spec.model.seq_length,
            "flops_per_token": arch.flops_per_token(spec.model.seq_length),
            "moe": arch.type == "mixtral",  # SMP's MoE implementation (MoEConfig) and Hugging Face's block
            # A pretrained Mistral's sliding window goes: SMP's Mistral runs context parallelism only without one.
            "clear_sliding_window": arch.type == "mistral" and spec.smp.context_parallel_degree > 1,
        },
        # What the image's SMP release has (launcher/catalog/smp.py).
        "smp_has": {"async_checkpoint": carries(spec.framework.pytorch_version, ASYNC_CHECKPOINT_SINCE)},
        "decisions": decisions.to_dict(),
        "smp": spec.smp.model_dump(),
        "training": {
            **t.model_dump(),
            "warmup_steps": t.warmup_steps if t.warmup_steps is not None else t.max_steps // 100,
            "betas": (t.beta1, t.beta2),
        },
        "data": {"train": spec.data.train, "format": spec.data.format},
        "output": {"save_final_model": spec.output.final_export},
        "progress_format": progress.LINE_FORMAT,
        "checkpoint_dir": CHECKPOINT_LOCAL_PATH,
        "requirements": requirements(spec.framework.pytorch_version, arch.type, rope_scaled(spec)),
    }


def _compiles(name: str, text: str, templates: TemplateSet, template: str) -> None:
    """A rendered Python file that does not compile is its template's fault: say which line it rendered."""
    try:
        compile(text, name, "exec")
    except SyntaxError as exc:
        rendered = (exc.text or "").strip()
        shown = f": {quoted(rendered)}" if rendered else ""
        raise TemplateError(templates[template].shown,
                            f"the {name} it renders does not compile: {exc.msg} (rendered line {exc.lineno}{shown})"
                            ) from None


def _no_credentials(name: str, text: str, templates: TemplateSet, template: str) -> None:
    """A rendered file that holds a credential (by its shape, as a spec value is checked: launcher.spec.secrets)
    would upload it in the job's source: its template is refused, naming the kind, never the value."""
    kind = credential_kind(text)
    if kind is not None:
        raise TemplateError(templates[template].shown,
                            f"the {name} it renders holds what looks like {kind}; a template must not carry "
                            "credentials (give the job a secret through the spec's `secrets:`)")


def render_source(templates: TemplateSet, context: Mapping[str, Any],
                  documents: Mapping[str, Any]) -> dict[str, str]:
    """The job's source dir as {file name: content}: the source templates rendered (each Python file compiled
    to prove it, each file scanned for credentials), the runtime modules, and each of `documents` written as
    sorted JSON under its name.

    The same inputs always give the same bytes."""
    files = {}
    for name, template in SOURCE_TEMPLATES.items():
        files[name] = render(templates, template, dict(context))
        if name.endswith(".py"):
            _compiles(name, files[name], templates, template)
        _no_credentials(name, files[name], templates, template)
    files.update((name, runtime_source(name)) for name in RUNTIME_MODULES)
    files.update((name, json.dumps(doc, indent=2, sort_keys=True) + "\n") for name, doc in documents.items())
    return files


def write_source_dir(files: Mapping[str, str], directory: str | Path) -> list[Path]:
    """Write the rendered files into directory (created if needed); returns their paths.

    Each file is written to a new temporary file beside it and renamed over the name: a link planted at
    `DIR/train.py` is replaced, never followed, so nothing outside the folder is overwritten."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in sorted(files.items()):
        path = out / name
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(content)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        written.append(path)
    return written
