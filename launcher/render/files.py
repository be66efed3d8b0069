"""Render the job's source dir from the Jinja templates shipped in the wheel, plus the runtime modules
(launcher/runtime/: plain Python, linted and tested as such) copied verbatim beside the entry script.

Templates are code: StrictUndefined turns a missing value into an error, and spec values reach a
Python template only through the `py` filter, which writes a Python literal, never raw text.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from launcher.catalog.architecture import HF_CLASSES
from launcher.catalog.smp import requirements
from launcher.core.names import CHECKPOINT_LOCAL_PATH, GIT_COMMIT_TAG, RERUN_TAG
from launcher.render import progress
from launcher.spec.models import JobSpec
from launcher.spec.presets import PRESETS

if TYPE_CHECKING:
    from launcher.plan.build import Plan


def py_literal(value: Any) -> str:
    """A Python literal for value; only plain data is accepted, so no spec string can become code."""
    if value is None or isinstance(value, (bool, int)):
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return f"float({str(value)!r})"
        return repr(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (list, tuple)):
        inner = ", ".join(py_literal(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py_literal(k)}: {py_literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} into a rendered script")


def templates_dir() -> Path:
    """The shipped templates: `templates/` at the top of a checkout (an editable install too), or
    `launcher/templates/` inside a wheel, where setup.py's build step copies them."""
    package = Path(__file__).resolve().parents[1]
    installed = package / "templates"
    return installed if installed.is_dir() else package.parent / "templates"


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["py"] = py_literal
    return env


def template_names() -> list[str]:
    return sorted(environment().list_templates())


def render_template(name: str, **context: Any) -> str:
    return environment().get_template(name).render(**context)


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
JOB_NAME_PLACEHOLDER = "<job-name>"
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
    if arch.type == "mixtral":
        config["num_local_experts"] = arch.num_experts
        config["num_experts_per_tok"] = arch.num_experts_per_tok
    config.update(tie_word_embeddings=False, use_cache=False, attn_implementation="sdpa")
    return config


def script_context(plan: Plan) -> dict[str, Any]:
    """What the templates may read; spec values stay data here and enter code only through `py`.

    The decisions are the plan's (the advisor's), so the script does what `plan` shows.
    """
    spec = plan.spec
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
        },
        "decisions": plan.decisions.to_dict(),
        "smp": spec.smp.model_dump(),
        "training": {
            **t.model_dump(),
            "warmup_steps": t.warmup_steps if t.warmup_steps is not None else t.max_steps // 100,
            "betas": (t.beta1, t.beta2),
        },
        "data": {"train": spec.data.train, "format": spec.data.format},
        "progress_format": progress.LINE_FORMAT,
        "checkpoint_dir": CHECKPOINT_LOCAL_PATH,
        "requirements": requirements(spec.framework.pytorch_version, spec.model.architecture().type),
    }


def deterministic_plan(plan: Plan) -> dict[str, Any]:
    """The plan without what changes from run to run: the timestamped job name, the spec's path, the
    git commit and the job a rerun repeats (provenance tags on the job; in the tarball they would defeat
    the content-addressed upload)."""

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(plan.job_name, JOB_NAME_PLACEHOLDER)
        if isinstance(value, list):
            return [scrub(v) for v in value]
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items()}
        return value

    data = scrub(plan.body_dict())
    data["spec_file"] = Path(plan.spec_file).name
    data["estimator"]["tags"] = [t for t in data["estimator"]["tags"] if t["Key"] not in (GIT_COMMIT_TAG, RERUN_TAG)]
    return data


def stored_spec(plan: Plan) -> dict[str, Any]:
    """The validated spec as the tarball keeps it (spec.json), so `rerun` can plan the job again.

    Resolved (extends merged, --set applied, ${VAR} expanded) but only the values the spec set, not the
    defaults: some rules read what a spec set explicitly, so it must validate back to the same spec.
    It holds no secret: secrets are Secrets Manager ARNs, and secret-looking environment values are
    redacted as in plan.json.
    """
    from launcher.spec.secrets import redact_env

    data = plan.spec.model_dump(mode="json", exclude={"extends"}, exclude_unset=True)
    if "environment" in data:
        data["environment"] = redact_env(data["environment"])
    return data


def render_source(plan: Plan) -> dict[str, str]:
    """The job's source dir as {file name: content}; the same plan always gives the same bytes.

    build_plan calls this (the plan's `source.files`); nothing but the plan is needed."""
    context = script_context(plan)
    files = {name: render_template(template, **context) for name, template in SOURCE_TEMPLATES.items()}
    files.update((name, runtime_source(name)) for name in RUNTIME_MODULES)
    files["distribution.json"] = json.dumps(plan.distribution, indent=2, sort_keys=True) + "\n"
    files["plan.json"] = json.dumps(deterministic_plan(plan), indent=2, sort_keys=True) + "\n"
    files["spec.json"] = json.dumps(stored_spec(plan), indent=2, sort_keys=True) + "\n"
    return files


def write_source_dir(files: Mapping[str, str], directory: str | Path) -> list[Path]:
    """Write the rendered files into directory (created if needed); returns their paths."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in sorted(files.items()):
        path = out / name
        path.write_text(content, encoding="utf-8")
        written.append(path)
    return written
