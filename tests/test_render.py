"""Rendering the source dir: goldens, valid Python, determinism, the progress line, no code from specs, the
distribution rendered from its template, and a team's own templates."""
import ast
import difflib
import json
import re
import shlex
from datetime import datetime, timezone

import jinja2
import pytest
import yaml

from launcher.core.errors import SpecError
from launcher.plan.build import build_plan
from launcher.render import progress
from launcher.render.files import RUNTIME_MODULES, SOURCE_TEMPLATES
from launcher.render.templates import MAX_TEMPLATE_BYTES, shipped, shown_path
from launcher.spec import load_spec
from tests.conftest import JOBS, REPO

GOLDENS = REPO / "tests" / "goldens"
EXPECTED_FILES = {*SOURCE_TEMPLATES, *RUNTIME_MODULES, "distribution.json", "plan.json", "spec.json"}
RUNTIME = REPO / "launcher" / "runtime"


def golden_variants() -> dict[str, tuple[str, list[str]]]:
    """tests/goldens/variants.txt: NAME SPEC [--set KEY=VALUE ...], as `make goldens` reads it."""
    variants = {}
    for line in (GOLDENS / "variants.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, spec, *rest = shlex.split(line)
        assert rest[::2] == ["--set"] * (len(rest) // 2) and len(rest) % 2 == 0, line
        variants[name] = (spec, rest[1::2])
    return variants


VARIANTS_OF_GOLDENS = golden_variants()


def golden_plan(name: str):
    spec, sets = VARIANTS_OF_GOLDENS[name]
    return build_plan(load_spec(REPO / spec, sets))


@pytest.fixture(autouse=True)
def _golden_env(monkeypatch):
    """The environment `make goldens` renders in: no bucket, role or profile from the developer's shell."""
    for var in ("SMP_LAUNCH_BUCKET", "SMP_LAUNCH_ROLE", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize("name", sorted(VARIANTS_OF_GOLDENS))
def test_rendered_source_matches_the_goldens(name):
    files = golden_plan(name).source.files
    golden_dir = GOLDENS / name
    assert golden_dir.is_dir(), f"no goldens for {name}: run `make goldens`"
    golden = {p.name: p.read_text(encoding="utf-8") for p in golden_dir.iterdir()}
    golden.update((module, (RUNTIME / module).read_text(encoding="utf-8")) for module in RUNTIME_MODULES)
    assert set(files) == set(golden) == EXPECTED_FILES, "run `make goldens` and review the diff"
    for file, content in files.items():
        if content != golden[file]:
            diff = "".join(difflib.unified_diff(golden[file].splitlines(True), content.splitlines(True),
                                                f"goldens/{name}/{file}", "rendered", n=1))
            pytest.fail(f"{name}/{file} drifted from its golden (run `make goldens`):\n{diff[:3000]}")


def test_every_golden_folder_is_a_variant_and_every_example_job_has_one():
    folders = {p.name for p in GOLDENS.iterdir() if p.is_dir()}
    assert folders == set(VARIANTS_OF_GOLDENS), "a stale or missing golden: run `make goldens`"
    as_is = {spec for spec, sets in VARIANTS_OF_GOLDENS.values() if not sets}
    assert as_is == {f"jobs/{p.name}" for p in JOBS.glob("*.yaml")}


def test_the_local_tiny_golden_is_what_the_local_run_renders():
    """tests/goldens/local-tiny-7b is the script `submit jobs/llama7b.yaml --local --tiny --max-steps 6` runs, which
    tools/gpu_check_async_ckpt.py runs on a GPU: the same overrides, so it cannot drift from the local run."""
    from launcher.local.run import local_spec

    _, changes = local_spec(str(JOBS / "llama7b.yaml"), [], True, 6)
    spec, sets = VARIANTS_OF_GOLDENS["local-tiny-7b"]
    assert spec == "jobs/llama7b.yaml" and sorted(sets) == sorted(changes)


def _conditions(text: str) -> list[str]:
    """The expressions of every `{% if %}` and `{% elif %}` in a template, and of every `{{ a if b else c }}`."""
    blocks = re.findall(r"{%-?\s*(?:el)?if\s+(.+?)\s*-?%}", text)
    return blocks + re.findall(r"{{[^}]*? if (.+?) else [^}]*}}", text)


@pytest.mark.parametrize("template", shipped().names)
def test_every_condition_in_a_template_is_true_in_one_golden_and_false_in_another(template):
    """The goldens are one per code path: each branch of every template is rendered by some golden, and
    skipped by another."""
    from launcher.render.files import template_context

    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    contexts = {}
    for name in VARIANTS_OF_GOLDENS:
        plan = golden_plan(name)
        contexts[name] = template_context(plan.spec, plan.decisions)
    conditions = _conditions(shipped()[template].text)
    if template in ("train.py.j2", "distribution.json.j2"):
        assert conditions, f"{template} has no conditions: the parser missed them"
    for condition in conditions:
        test = env.compile_expression(condition)
        outcomes = {name: bool(test(**context)) for name, context in contexts.items()}
        assert set(outcomes.values()) == {True, False}, f"{template}: `{condition}` is {outcomes} in every golden"


def test_rendering_is_deterministic_across_runs_and_clocks():
    loaded = load_spec(JOBS / "llama7b.yaml")
    a = build_plan(loaded, now=datetime(2026, 1, 1, tzinfo=timezone.utc)).source.files
    b = build_plan(loaded, now=datetime(2027, 6, 30, 23, 59, 59, tzinfo=timezone.utc)).source.files
    assert a == b
    assert "<job-name>" in a["plan.json"] and "2026" not in a["plan.json"]


VARIANTS = {  # one rendering per template branch the example jobs leave untaken
    "fp8-p5-nccl": ["cluster.instance_type=ml.p5.48xlarge", "training.precision=fp8", "smp.backend=auto"],
    "mixtral-ep": ["model.preset=mixtral-8x7b", "smp.expert_parallel_degree=2", "smp.hybrid_shard_degree=4"],
    "neox-no-shard-fp16": ["model.preset=gpt-neox-20b", "smp.hybrid_shard_degree=1", "training.precision=fp16",
                           "smp.activation_checkpointing=false"],
    "pretrained-files": ["model.pretrained=meta-llama/Llama-2-7b-hf", "data.train=s3://b-1/tokens/",
                         "data.format=npy", "smp.delayed_param_init=true"],
}


@pytest.mark.parametrize("overrides", [[]] + list(VARIANTS.values()), ids=["llama7b", *VARIANTS])
def test_every_rendered_python_file_compiles(overrides):
    files = build_plan(load_spec(JOBS / "llama7b.yaml", overrides)).source.files
    for name, content in files.items():
        if name.endswith(".py"):
            compile(content, name, "exec")
    json.loads(files["distribution.json"])
    json.loads(files["plan.json"])


def constants(source: str) -> dict[str, object]:
    """Module-level NAME = literal assignments of a rendered script."""
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out


def test_script_follows_the_spec_and_the_advisors_decisions():
    loaded = load_spec(JOBS / "llama175b.yaml")
    plan = build_plan(loaded)
    script = plan.source.files["train.py"]
    c = constants(script)
    assert c["SHARDING_STRATEGY"] == plan.decisions.sharding_strategy == "HYBRID_SHARD"
    assert c["MODEL_CONFIG"]["num_hidden_layers"] == 96 and c["MODEL_CONFIG"]["use_cache"] is False
    assert c["BATCH_SIZE"] == 6 and c["WARMUP_STEPS"] == 10  # 1% of 1000 steps
    assert "import smdistributed.dataparallel.torch.torch_smddp" in script  # backend smddp on p4d
    assert "tsm.transform(model, cp_comm_type='p2p')" in script  # tensor parallel degree 4, SMP 2.8.0
    assert "DelayedParamIniter" in script and "offload_wrapper(fsdp_model)" in script
    order = [script.index(s) for s in ("import smdistributed.dataparallel.torch.torch_smddp",
                                        "dist.init_process_group(backend=backend", "    tsm.init()\n")]
    assert order == sorted(order)  # SMDDP, then the process group, then SMP
    overrides = ["smp.backend=nccl", "model.use_smp_implementation=false"]
    nccl = build_plan(load_spec(JOBS / "llama7b.yaml", overrides)).source.files
    assert "smddp" not in nccl["train.py"] and "tsm.transform(" not in nccl["train.py"]
    assert "DelayedParamIniter" not in nccl["train.py"]
    default = build_plan(load_spec(JOBS / "llama7b.yaml")).source.files["train.py"]
    assert "tsm.transform(model, cp_comm_type='p2p')" in default  # SMP 2.7.0 takes it, as AWS's scripts pass it
    older = build_plan(load_spec(JOBS / "llama7b.yaml", ["framework.pytorch_version='2.3.1'"])).source.files
    assert "tsm.transform(model)" in older["train.py"]  # SMP 2.5.0's transform has no cp_comm_type


def test_the_scripts_progress_line_is_what_the_parser_and_metric_definitions_read():
    fmt = constants(build_plan(load_spec(JOBS / "llama7b.yaml")).source.files["train.py"])["PROGRESS_FORMAT"]
    assert fmt == progress.LINE_FORMAT
    values = {"step": 120, "loss": 2.3456789, "lr": 9.5e-05, "tokens_per_s": 51234.56, "tflops_per_gpu": 143.219,
              "gpu_mem_gb": 31.5}
    line = fmt.format(**values)
    parsed = progress.parse(f"[algo-1] {line}")
    assert parsed == {"step": 120.0, "loss": 2.3457, "lr": 9.5e-05, "tokens_per_s": 51234.6,
                      "tflops_per_gpu": 143.22, "gpu_mem_gb": 31.5}
    for definition in progress.metric_definitions():
        field = next(f for f, n in progress.METRIC_NAMES.items() if n == definition["Name"])
        m = re.search(definition["Regex"], line)
        assert m and float(m.group(1)) == parsed[field], definition


HOSTILE = [
    "'; __import__('os').system('echo pwned') #",
    '"""; __import__("os").system("echo pwned"); """',
    "'''\n__import__('os').system('echo pwned')\n'''",
    "{{ 7 * 7 }} {% if true %}x{% endif %} {# c #} {{ config }}",
    "\\'; exec('x = 1') #\n\r\t\x00 \u2028 caf\u00e9 \U0001f600",
]


def _spec(strings: list[str]) -> dict:
    """A spec with these strings in every free-text field; S3 fields take them after `s3://bucket/`.

    S3 URIs and hyperparameter names refuse control characters (SageMaker would), so those take the
    strings with each control character made a space; kms_key_id has a pattern of its own.
    """
    one_line = [re.sub("[\x00-\x1f\x7f-\x9f\u2028]", " ", s) for s in strings]
    return {
        "name": "inject",
        "description": strings[0],
        "model": {"preset": "llama2-7b", "pretrained": strings[1]},
        "cluster": {"region": "us-west-2", "kms_key_id": "alias/team-key"},
        "data": {"train": "s3://b-1/" + one_line[3], "validation": "s3://b-1/" + one_line[4],
                 "channels": {"extra": "s3://b-1/" + one_line[0]}},
        "output": {"path": "s3://b-1/" + one_line[1], "checkpoint_path": "s3://b-1/" + one_line[2],
                   "code_path": "s3://b-1/" + one_line[3]},
        "tags": {"team": "a=b+c @x:/y. -_"},  # tag values have a pattern: the characters it allows
        "environment": {f"VAR_{i}": s for i, s in enumerate(strings)},
        "hyperparameters": {k: s for k, s in zip(one_line, strings, strict=True)},
    }


def _shape(source: str) -> str:
    """The syntax tree with every string constant blanked: what the code does, not what it says."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""
    return ast.dump(tree)


def test_hostile_strings_in_every_free_text_field_stay_string_constants(write_spec):
    benign = [f"plain value {i}" for i in range(len(HOSTILE))]
    hostile_files = build_plan(load_spec(write_spec(yaml.safe_dump(_spec(HOSTILE)), "hostile.yaml"))).source.files
    benign_files = build_plan(load_spec(write_spec(yaml.safe_dump(_spec(benign)), "benign.yaml"))).source.files
    script = hostile_files["train.py"]
    strings = {n.value for n in ast.walk(ast.parse(script)) if isinstance(n, ast.Constant)}
    for s in HOSTILE[:2]:  # description and model.pretrained reach the script, unchanged
        assert s in strings
    hyperparameters = constants(script)["HYPERPARAMETERS"]
    assert set(HOSTILE) <= set(hyperparameters.values())
    assert {re.sub("[\x00-\x1f\x7f-\x9f\u2028]", " ", s) for s in HOSTILE} <= set(hyperparameters)
    assert constants(script)["TRAIN_DATA"].startswith("s3://b-1/{{ 7 * 7 }}")
    for name, content in hostile_files.items():
        if name.endswith(".py"):
            assert _shape(content) == _shape(benign_files[name]), f"{name}: a spec string changed the code"
            names = {n.id for n in ast.walk(ast.parse(content)) if isinstance(n, ast.Name)}
            assert "__import__" not in names and "exec" not in names
    plan = json.loads(hostile_files["plan.json"])
    assert plan["estimator"]["environment"] == {f"VAR_{i}": s for i, s in enumerate(HOSTILE)}
    assert hostile_files["requirements.txt"] == benign_files["requirements.txt"]


def test_render_command_writes_the_source_dir(run_cli, tmp_path):
    out = tmp_path / "src"
    r = run_cli("render", str(JOBS / "llama70b.yaml"), "--out", str(out), "--output", "json")
    assert r.code == 0, r.err
    assert set(json.loads(r.out)["files"]) == EXPECTED_FILES
    assert {p.name for p in out.iterdir()} == EXPECTED_FILES
    assert (out / "train.py").read_text() == (GOLDENS / "delayed-init" / "train.py").read_text()
    assert json.loads(r.out)["templates"] == dict.fromkeys(shipped().names, "shipped")
    r = run_cli("render", str(JOBS / "llama70b.yaml"), "--out", str(tmp_path / "t"), "--set", "smp.bogus=1")
    assert r.code == 2 and "bogus" in r.err


def _render_with(overrides: list[str], **decisions: object) -> dict[str, str]:
    """The source dir with some of the plan's decisions forced: the script follows what it is given."""
    import dataclasses

    from launcher.render.files import render_template, template_context

    plan = build_plan(load_spec(JOBS / "llama7b.yaml", overrides))
    context = template_context(plan.spec, dataclasses.replace(plan.decisions, **decisions))
    return {name: render_template(template, context) for name, template in SOURCE_TEMPLATES.items()}


def _function(source: str, name: str) -> str:
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    return ast.get_source_segment(source, node)


def _method(source: str, cls: str, name: str) -> str:
    tree = ast.parse(source)
    klass = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    node = next(n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == name)
    return ast.get_source_segment(source, node)


@pytest.mark.parametrize("transform", [True, False])
def test_the_implementation_in_use_picks_the_wrapped_block_and_the_clipping(transform):
    """SMP's implementation at TP=1 too: its TransformerLayer is what FSDP wraps and checkpoints, and SMP's
    clip_grad_norm_ clips; without it, Hugging Face's block and FSDP's own clip."""
    script = _render_with([], transform=transform, grad_clip="smp" if transform else "fsdp")["train.py"]
    compile(script, "train.py", "exec")
    layer, clip = _function(script, "layer_class"), _function(script, "clip_gradients")
    assert ("TransformerLayer" in layer) is transform
    assert ("torch.sagemaker.grad_norm" in clip) is transform
    assert ("fsdp_model.clip_grad_norm_" in clip) is not transform
    assert ("model = transform(model)" in script) is transform
    assert "tsm.clip_grad_norm_(fsdp_model, max_norm)" in clip  # the local stand-in emulates SMP's either way
    assert "layer_cls = layer_class()" in _function(script, "wrap")  # FSDP wraps what AC checkpoints
    assert '[(layer_class(), "REENTRANT", None)]' in _function(script, "checkpointed_classes")
    assert "isinstance(m, c)" in _function(script, "checkpoint_activations")
    assert "checkpoint_activations(fsdp_model)" in _function(script, "train")


def test_a_moe_model_is_transformed_on_the_meta_device_and_wraps_smps_layer():
    """AWS's examples: with delayed init, MoE's tsm.transform runs under init_empty_weights, and FSDP
    wraps SMP's TransformerLayer (what the transformed model holds), not Hugging Face's MixtralDecoderLayer."""
    moe = ["model.preset=mixtral-8x7b", "smp.expert_parallel_degree=2", "smp.hybrid_shard_degree=4",
           "cluster.instance_type=ml.p4de.24xlarge"]
    script = _render_with([*moe, "smp.delayed_param_init=true"], transform=True)["train.py"]
    body = _function(script, "transform")
    withs = [n for n in ast.walk(ast.parse(body)) if isinstance(n, ast.With)]
    assert [ast.unparse(w.items[0].context_expr) for w in withs] == ["init_empty_weights()"]
    assert ast.unparse(withs[0].body[0]) == "return tsm.transform(model, config=moe)"
    layer = _function(script, "layer_class")
    assert "from torch.sagemaker.tensor_parallel.transformer import TransformerLayer" in layer
    assert "return tsm.TransformerLayer" in layer and "hf_classes()" not in layer
    pretrained = _render_with([*moe, "model.pretrained=mistralai/Mixtral-8x7B-v0.1"], transform=True)["train.py"]
    body = _function(pretrained, "transform")
    assert "use_cpu_initialization=dist.get_rank() == 0" in body and "if dist.get_rank() != 0:" in body


def test_the_group_timeout_and_checkpoint_layout_are_awss():
    files = build_plan(load_spec(JOBS / "llama175b.yaml")).source.files
    script, ckpt = files["train.py"], files["train_checkpoint.py"]
    assert "timeout=timedelta(seconds=7200)" in script
    layout = _function(script, "checkpoint_layout")
    assert "st.ranker.get_rep_rank(dist.get_rank()) == 0" in layout and "fsdp_model.process_group" in layout
    save = _method(ckpt, "Checkpoints", "save")
    assert "if self.layout.writer:" in save and "shard_dir(self.root, step, self.layout)" in save
    for writer in ("TorchWriter", "AsyncWriter"):
        assert "process_group=layout.group" in _method(ckpt, writer, "write") + _method(ckpt, writer, "read")
    assert "coordinator_rank=layout.coordinator" in _method(ckpt, "AsyncWriter", "write")
    assert "coordinator_rank=layout.coordinator" in _method(ckpt, "AsyncWriter", "read")
    assert "coordinator=train_checkpoint.lowest_rank(group)" in layout  # AWS's get_coordinator_rank
    assert "min(dist.get_process_group_ranks(group))" in _function(ckpt, "lowest_rank")
    assert 'f"tp{layout.tp_degree}-{layout.tp_rank}"' in _function(ckpt, "shard_dir")
    export = _function(script, "save_final_model")  # the 175B example exports sharded: nothing gathered
    assert "train_checkpoint.save_model(MODEL_DIR, fsdp_model, layout)" in export and "FULL_STATE_DICT" not in script
    assert "if layout.writer:" in _function(ckpt, "save_model") and "write(state, path, layout)" in _function(
        ckpt, "save_model")
    full = build_plan(load_spec(JOBS / "llama175b.yaml", ["output.save_final_model=full"])).source.files["train.py"]
    export = _function(full, "save_final_model")
    assert "FULL_STATE_DICT" in export and "rank0_only=True" in export and "pytorch_model.bin" in export


def test_weight_decay_spares_norms_and_biases(tmp_path, monkeypatch):
    """AWS's parameter groups (get_param_groups_by_weight_decay): a norm layer's own parameters and every
    parameter named `bias` get no weight decay. Transformer Engine's fused LayerNormLinear (QKV) and
    LayerNormMLP (fc1/fc2) are projections: their weights decay, their fused norm's weight too, as AWS's do."""
    import importlib
    import sys

    torch = pytest.importorskip("torch")
    src = tmp_path / "src"
    from launcher.render.files import write_source_dir

    write_source_dir(build_plan(load_spec(JOBS / "llama7b.yaml")).source.files, src)
    monkeypatch.syspath_prepend(str(src))
    for name in ("train", "train_data", "train_checkpoint", "tsm_local"):
        sys.modules.pop(name, None)
    train = importlib.import_module("train")

    def holding(cls_name, **shapes):  # a module of that class name holding parameters of those shapes
        module = type(cls_name, (torch.nn.Module,), {})()
        for name, shape in shapes.items():
            setattr(module, name, torch.nn.Parameter(torch.ones(shape)))
        return module

    model = torch.nn.ModuleDict({
        "embed": torch.nn.Embedding(8, 4), "proj": torch.nn.Linear(4, 4), "ln": torch.nn.LayerNorm(4),
        "rms": holding("LlamaRMSNorm", weight=4), "te_rms": holding("RMSNorm", weight=4),
        "qkv": holding("LayerNormLinear", weight=(12, 4), bias=12, layer_norm_weight=4),
        "mlp": holding("LayerNormMLP", fc1_weight=(16, 4), fc2_weight=(4, 16), fc1_bias=16, layer_norm_weight=4),
    })
    decay, no_decay = train.param_groups(model)
    named = {id(p): n for n, p in model.named_parameters()}
    assert sorted(named[id(p)] for p in decay["params"]) == [
        "embed.weight", "mlp.fc1_bias", "mlp.fc1_weight", "mlp.fc2_weight", "mlp.layer_norm_weight", "proj.weight",
        "qkv.layer_norm_weight", "qkv.weight"]
    assert sorted(named[id(p)] for p in no_decay["params"]) == [
        "ln.bias", "ln.weight", "proj.bias", "qkv.bias", "rms.weight", "te_rms.weight"]
    assert decay["weight_decay"] == train.WEIGHT_DECAY > 0 and no_decay["weight_decay"] == 0.0
    for name in ("train", "train_data", "train_checkpoint", "tsm_local"):
        sys.modules.pop(name, None)


def _import_rendered(tmp_path, monkeypatch, overrides):
    """The rendered train.py of llama7b with overrides, imported (torch.sagemaker absent: tsm is the stand-in)."""
    import importlib
    import sys

    from launcher.render.files import write_source_dir

    pytest.importorskip("torch")
    src = tmp_path / "src"
    write_source_dir(build_plan(load_spec(JOBS / "llama7b.yaml", overrides)).source.files, src)
    monkeypatch.syspath_prepend(str(src))
    for name in ("train", "train_data", "train_checkpoint", "tsm_local"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return importlib.import_module("train")


def _fake_modules(monkeypatch, **modules):
    """Stand-in modules under dotted names (Transformer Engine's, SMP's), parents created as needed."""
    import sys
    import types

    for dotted, attrs in modules.items():
        parts = dotted.split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            if name not in sys.modules or i == len(parts):
                module = sys.modules.get(name) if i < len(parts) else types.ModuleType(name)
                monkeypatch.setitem(sys.modules, name, module or types.ModuleType(name))
            if i > 1:
                setattr(sys.modules[".".join(parts[:i - 1])], parts[i - 1], sys.modules[name])
        for key, value in attrs.items():
            setattr(sys.modules[dotted], key, value)


P5_FP8 = ["cluster.instance_type=ml.p5.48xlarge", "training.precision=fp8"]
MOE_FP8 = [*P5_FP8, "model.preset=mixtral-8x7b", "smp.expert_parallel_degree=2", "smp.hybrid_shard_degree=16",
           "cluster.instance_count=4"]


@pytest.mark.parametrize("moe", [False, True], ids=["dense", "moe"])
def test_fp8_checkpoints_with_transformer_engines_checkpoint_and_builds_its_recipe_once(tmp_path, monkeypatch, moe):
    """AWS's train_utils.apply_activation_checkpoint under fp8: transformer_engine.pytorch.checkpoint, non-reentrant,
    with SMP's RNG tracker and TP group; with MoE the attention (TE's checkpoint) and the MoE layer (PyTorch's)
    apart. train_lib.py builds the DelayedScaling recipe once; so does the script, however many steps run."""
    import functools
    import types

    train = _import_rendered(tmp_path, monkeypatch, MOE_FP8 if moe else P5_FP8)
    built, autocasts = [], []

    class DelayedScaling:
        def __init__(self, **kwargs):
            built.append(kwargs)

    def te_checkpoint(function, *args, **kwargs):
        return function(*args)

    attention, moe_layer = type("MultiheadAttention", (), {}), type("MoELayer", (), {})
    _fake_modules(monkeypatch, **{
        "transformer_engine.common.recipe": {"DelayedScaling": DelayedScaling,
                                             "Format": types.SimpleNamespace(HYBRID="hybrid")},
        "transformer_engine.pytorch": {"checkpoint": te_checkpoint,
                                       "fp8_autocast": lambda **kw: autocasts.append(kw) or kw},
        "transformer_engine.pytorch.attention": {"MultiheadAttention": attention},
        "torch.sagemaker.moe.moe_layer": {"MoELayer": moe_layer},
        "torch.sagemaker.tensor_parallel.transformer": {"TransformerLayer": type("TransformerLayer", (), {})},
    })
    tracker, tp_group = object(), object()
    monkeypatch.setattr(train, "STAND_IN", False)
    state = types.SimpleNamespace(get_rng_state_tracker=tracker, tp_process_group=tp_group, world_process_group="world")
    monkeypatch.setattr(train.tsm, "state", state, raising=False)
    for _ in range(3):
        train.fp8_context()
    assert len(built) == 1 and built[0]["amax_history_len"] == 1024 and len(autocasts) == 3
    assert all(a["fp8_recipe"] is autocasts[0]["fp8_recipe"] and a["fp8_group"] == "world" for a in autocasts)

    classes = train.checkpointed_classes()
    te = classes[0][2]
    assert isinstance(te, functools.partial) and te.func is te_checkpoint
    assert te.keywords == {"distribute_saved_activations": False, "get_rng_state_tracker": tracker,
                           "tp_group": tp_group, "use_reentrant": False}
    import sys

    layer = sys.modules["torch.sagemaker.tensor_parallel.transformer"].TransformerLayer
    if moe:  # "checkpointing entire TransformerLayer is not supported" with fp8 and MoE
        assert [(c, impl) for c, impl, _ in classes] == [(attention, "NO_REENTRANT"), (moe_layer, "NO_REENTRANT")]
        assert classes[1][2] is None
    else:
        assert [(c, impl) for c, impl, _ in classes] == [(layer, "NO_REENTRANT")]


def test_outside_fp8_the_layer_is_checkpointed_reentrant(tmp_path, monkeypatch):
    train = _import_rendered(tmp_path, monkeypatch, [])
    assert train.checkpointed_classes() == [(train.layer_class(), "REENTRANT", None)]
    assert "transformer_engine" not in _function((tmp_path / "src" / "train.py").read_text(), "checkpointed_classes")


@pytest.mark.parametrize("version, sent, reads_cp", [
    ("2.2.0", ["hybrid_shard_degree", "sm_activation_offloading", "activation_loading_horizon",
               "tensor_parallel_degree", "expert_parallel_degree"], False),
    ("2.3.1", ["hybrid_shard_degree", "sm_activation_offloading", "activation_loading_horizon",
               "fsdp_cache_flush_warnings", "allow_empty_shards", "tensor_parallel_degree", "context_parallel_degree",
               "expert_parallel_degree"], True),
])
def test_an_older_image_gets_only_the_parameters_its_smp_release_takes(version, sent, reads_cp):
    """SMP 2.3.1 (PyTorch 2.2.0) predates context parallelism (SMP 2.5.0): the distribution leaves out what that
    release has no parameter for, and the script does not read tsm.state.cp_size there."""
    plan = build_plan(load_spec(JOBS / "llama7b.yaml", [f"framework.pytorch_version='{version}'"]))
    assert list(plan.distribution["smdistributed"]["modelparallel"]["parameters"]) == sent
    assert list(plan.decisions.smp_parameters) == sent
    assert plan.decisions.smp_release == {"2.2.0": "2.3.1", "2.3.1": "2.5.0"}[version]
    script = plan.source.files["train.py"]
    assert ("return tsm.state.cp_size, tsm.state.cp_rank" in _function(script, "context_parallel")) is reads_cp
    assert ("return 1, 0" in _function(script, "context_parallel")) is not reads_cp
    assert "cp_size" not in _function(script, "forward") and "cp_size" not in _function(script, "data_parallel_rank")


# -- data.train as one exact constant, float literals, the template folder: each test fails on a realistic bug --

HOSTILE_TRAIN = [
    "s3://my-bucket/x'; open('pwned', 'w').close() #",
    's3://my-bucket/x"; open("pwned", "w").close() #',
    "s3://my-bucket/x'''; open('pwned', 'w').close(); '''",
    "s3://my-bucket/a'b\"c\\'d\\\\ {{ data.train }} #",
    "s3://my-bucket/x\nopen('pwned', 'w').close()",
    "s3://my-bucket/x\r\n\t'\\x00",
]


def _train_data(script: str) -> tuple[object, str]:
    """TRAIN_DATA's value in the script, and the physical lines its assignment sits on."""
    lines = script.splitlines()
    for node in ast.parse(script).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["TRAIN_DATA"]:
            assert isinstance(node.value, ast.Constant), ast.dump(node.value)
            return node.value.value, "\n".join(lines[node.lineno - 1:node.end_lineno])
    raise AssertionError("train.py has no TRAIN_DATA assignment")


def _shape_replacing(source: str, replace: str, by: str) -> str:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value == replace:
            node.value = by
    return ast.dump(tree)


@pytest.mark.parametrize("train", HOSTILE_TRAIN, ids=range(len(HOSTILE_TRAIN)))
def test_data_train_enters_the_script_as_one_exact_string_constant(write_spec, train, tmp_path, monkeypatch):
    """Kills: data.train spliced into train.py as text (quotes in an S3 key then become code)."""
    from launcher.core.errors import SpecError
    from tests.conftest import MINIMAL

    benign = "s3://my-bucket/plain/prefix"
    spec = yaml.safe_load(MINIMAL)
    try:
        hostile = load_spec(write_spec(yaml.safe_dump({**spec, "data": {"train": train}}), "hostile.yaml"))
    except SpecError:
        pytest.skip("the spec loader refuses this value, so it never reaches a script")
    plain = load_spec(write_spec(yaml.safe_dump({**spec, "data": {"train": benign}}), "plain.yaml"))
    hostile_files, plain_files = build_plan(hostile).source.files, build_plan(plain).source.files
    value, source = _train_data(hostile_files["train.py"])
    assert value == train
    for name, content in hostile_files.items():
        if name.endswith(".py"):  # the same program as with a plain prefix: only the constant differs
            assert _shape_replacing(content, train, benign) == _shape_replacing(plain_files[name], benign, benign), name
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(source, "train.py", "exec"), namespace)  # the assignment's own lines: nothing else runs
    assert namespace["TRAIN_DATA"] == train and not (tmp_path / "pwned").exists()


def test_quotes_in_data_train_pass_the_spec_loader(write_spec):
    """So the test above never skips its quote cases: the S3 pattern allows anything after the bucket."""
    from tests.conftest import MINIMAL

    for train in HOSTILE_TRAIN[:4]:
        spec = {**yaml.safe_load(MINIMAL), "data": {"train": train}}
        assert load_spec(write_spec(yaml.safe_dump(spec))).spec.data.train == train


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), 1e-300, -0.0])
def test_every_float_becomes_a_literal_that_evaluates_to_itself(value):
    """Kills render: infinities written as bare `inf` (a NameError in the script) when only NaN is special-cased."""
    import math

    from launcher.render.files import py_literal

    back = eval(py_literal(value), {"__builtins__": {"float": float}})  # noqa: S307 - our own literal
    if math.isnan(value):
        assert math.isnan(back)
    else:
        assert back == value and math.copysign(1, back) == math.copysign(1, value)


def test_the_template_list_and_a_nested_output_folder(tmp_path):
    """Kills render: the template list dropped, and the output folder's parents not created."""
    from launcher.render.files import SOURCE_TEMPLATES, template_names, write_source_dir

    assert set(SOURCE_TEMPLATES.values()) <= set(template_names())
    written = write_source_dir({"train.py": "x = 1\n"}, tmp_path / "a" / "b" / "source")
    assert [p.read_text() for p in written] == ["x = 1\n"]
    again = write_source_dir({"train.py": "x = 2\n"}, tmp_path / "a" / "b" / "source")  # an existing folder
    assert [p.read_text() for p in again] == ["x = 2\n"]


def test_the_templates_folder_holds_the_templates():
    """Kills render: the templates folder taken from the wrong search location."""
    from launcher.render.files import SOURCE_TEMPLATES, templates_dir

    assert all((templates_dir() / name).is_file() for name in SOURCE_TEMPLATES.values())


# ---- the distribution, rendered from templates/distribution.json.j2 and checked

CAPTURED = json.loads((GOLDENS / "distributions.json").read_text())  # what the Python-built dict was
BASE_SPEC = {"name": "demo", "model": {"preset": "llama2-7b"}, "output": {"path": "s3://my-bucket/smp"}}


@pytest.mark.parametrize("job", sorted(CAPTURED["jobs"]))
def test_each_example_jobs_distribution_is_the_dict_python_built(job):
    plan = build_plan(load_spec(JOBS / job))
    want = CAPTURED["jobs"][job]
    assert plan.distribution == want == plan.estimator.distribution
    assert json.dumps(plan.distribution) == json.dumps(want)  # the key order too: mp_parameters is this JSON
    assert json.loads(plan.source.files["distribution.json"]) == want
    params = want["smdistributed"]["modelparallel"]["parameters"]
    assert plan.request["HyperParameters"]["mp_parameters"] == json.dumps(params)


@pytest.mark.parametrize("case", CAPTURED["smp_sections"], ids=lambda c: json.dumps(c["smp"], sort_keys=True)[:80])
def test_every_smp_section_the_tests_use_renders_the_dict_python_built(case, write_spec):
    """The distribution depends on the smp section alone: each one a test of the plan, render, rules, spec,
    submit or provenance builds (and each parameter those leave at its default, set) gives the same dict."""
    plan = build_plan(load_spec(write_spec(yaml.safe_dump({**BASE_SPEC, "smp": case["smp"]}))))
    assert json.dumps(plan.distribution) == json.dumps(case["distribution"])


def _params(d: dict) -> dict:
    return d["smdistributed"]["modelparallel"]["parameters"]


REFUSED = {  # a change to a good distribution -> words of the refusal
    "no torch_distributed": (lambda d: d.pop("torch_distributed"), "the distribution has no torch_distributed"),
    "another launcher": (lambda d: d.update(pytorchddp={"enabled": True}), "has 'pytorchddp'"),
    "torchrun off": (lambda d: d["torch_distributed"].update(enabled=False), "SMP v2 runs under torchrun"),
    "torchrun 'true'": (lambda d: d["torch_distributed"].update(enabled="true"), "SMP v2 runs under torchrun"),
    "SMDDP too": (lambda d: d["smdistributed"].update(dataparallel={"enabled": True}), "has 'dataparallel'"),
    "enabled 1": (lambda d: d["smdistributed"]["modelparallel"].update(enabled=1), "the boolean true"),
    "no parameters": (lambda d: d["smdistributed"]["modelparallel"].pop("parameters"), "has no parameters"),
    "parameters from a file": (lambda d: d["smdistributed"]["modelparallel"].update(parameters="mp.json"),
                               "must be an object"),
    "an SMP v1 parameter": (lambda d: _params(d).update(pipeline_parallel_degree=2), "not an SMP v2 parameter"),
    "a misspelt one": (lambda d: _params(d).update(random_sead=1), "did you mean random_seed?"),
    "a bool for a degree": (lambda d: _params(d).update(context_parallel_degree=True), "context_parallel_degree:"),
    "a float for a degree": (lambda d: _params(d).update(expert_parallel_degree=1.0), "expert_parallel_degree:"),
    "a horizon of 0": (lambda d: _params(d).update(activation_loading_horizon=0), "activation_loading_horizon:"),
    "a string for a flag": (lambda d: _params(d).update(allow_empty_shards="no"), "allow_empty_shards:"),
    "a negative seed": (lambda d: _params(d).update(random_seed=-1), "random_seed:"),
    "a null seed": (lambda d: _params(d).update(random_seed=None), "random_seed is null"),
    "another degree": (lambda d: _params(d).update(hybrid_shard_degree=4),
                       "hybrid_shard_degree 4 is not the spec's smp.hybrid_shard_degree (8)"),
    "a degree left out": (lambda d: _params(d).pop("hybrid_shard_degree"),
                          "hybrid_shard_degree left out (SMP's default 0) is not the spec's"),
}


@pytest.mark.parametrize("change", REFUSED, ids=str)
def test_a_distribution_smp_v2_would_refuse_is_refused_with_the_reason(change):
    import copy

    from launcher.render.distribution import refusal

    smp = load_spec(JOBS / "llama7b.yaml").spec.smp
    good = copy.deepcopy(CAPTURED["jobs"]["llama7b.yaml"])
    assert refusal(good, smp) is None
    edit, words = REFUSED[change]
    edit(good)
    problem = refusal(good, smp)
    assert problem is not None and words in problem, problem


def test_a_distribution_that_is_not_an_object_is_refused_showing_its_first_60_characters():
    from launcher.render.distribution import refusal

    smp = load_spec(JOBS / "llama7b.yaml").spec.smp
    listed = ["torch_distributed", "smdistributed"] * 5
    assert refusal(listed, smp) == ("the distribution must be an object with smdistributed, torch_distributed, not "
                                    + json.dumps(listed)[:60])


def test_every_captured_distribution_passes_the_check_and_other_parameters_may_differ():
    from launcher.render.distribution import refusal
    from launcher.spec.models import SmpSpec

    for case in CAPTURED["smp_sections"]:
        assert refusal(case["distribution"], SmpSpec.model_validate(case["smp"])) is None, case["smp"]
    smp = load_spec(JOBS / "llama7b.yaml").spec.smp
    house = json.loads(json.dumps(CAPTURED["jobs"]["llama7b.yaml"]))
    _params(house).update(fsdp_cache_flush_warnings=False, allow_empty_shards=True, random_seed=2**32 - 1)
    _params(house).pop("activation_loading_horizon")
    assert refusal(house, smp) is None  # a house policy on the flags; the degrees stay the spec's


@pytest.mark.parametrize("text, words", [
    ('{"a": 1, "a": 2}', "key 'a' is written twice"),
    ('{"a": NaN}', "NaN is not a JSON number"),
])
def test_the_rendered_json_is_read_strictly(text, words):
    from launcher.render.distribution import parse

    with pytest.raises(ValueError, match=re.escape(words)):
        parse(text)


# ---- a team's own templates

def _team(folder, texts: dict[str, str | bytes | None]):
    """A templates folder holding these templates, by file name (bytes as they are; None: a folder by that name)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        if text is None:
            (folder / name).mkdir()
        elif isinstance(text, bytes):
            (folder / name).write_bytes(text)
        else:
            (folder / name).write_text(text)
    return folder


TEAM_MARK = "\n# built by the team's template\n"


def test_a_team_train_template_replaces_the_script_and_nothing_else(tmp_path, write_spec):
    team = _team(tmp_path / "team", {"train.py.j2": shipped()["train.py.j2"].text + TEAM_MARK})
    spec = write_spec(f"extends: {JOBS / 'llama7b.yaml'}\ntemplates: team\n")
    plan = build_plan(load_spec(spec))
    ours = build_plan(load_spec(JOBS / "llama7b.yaml"))
    files, shipped_files = plan.source.files, ours.source.files
    assert files["train.py"] == shipped_files["train.py"] + TEAM_MARK
    for name in ("train_secrets.py", "requirements.txt", "distribution.json", *RUNTIME_MODULES):
        assert files[name] == shipped_files[name]
    assert plan.templates.used() == {**dict.fromkeys(shipped().names, "shipped"),
                                     "train.py.j2": shown_path((team / "train.py.j2").resolve())}
    assert plan.templates["train.py.j2"].path == str((team / "train.py.j2").resolve())
    assert plan.to_dict()["templates"]["train.py.j2"] != "shipped"
    stored = json.loads(files["plan.json"])
    assert stored["templates"] == {**dict.fromkeys(shipped().names, "shipped"), "train.py.j2": "team"}
    assert json.loads(files["spec.json"])["templates"] == "team"
    assert all(str(tmp_path) not in text for text in files.values()), "a local path in the tarball"


def test_the_spec_hash_covers_the_team_templates_contents_not_their_folder(tmp_path):
    text = shipped()["train.py.j2"].text + TEAM_MARK
    one, two = _team(tmp_path / "one", {"train.py.j2": text}), _team(tmp_path / "two", {"train.py.j2": text})
    edited = _team(tmp_path / "edited", {"train.py.j2": text + "# and edited\n"})

    def digest(folder=None) -> str:
        return build_plan(load_spec(JOBS / "llama7b.yaml", [f"templates={folder}"] if folder else [])).spec_hash

    assert digest(one) == digest(two) != digest()
    assert digest(edited) not in (digest(one), digest())
    plan = build_plan(load_spec(JOBS / "llama7b.yaml", [f"templates={edited}"]))
    assert {"Key": "smp-launch:spec-hash", "Value": plan.spec_hash} in plan.estimator.tags


def test_templates_lie_relative_to_the_file_that_names_them_and_the_command_line_wins(tmp_path, write_spec,
                                                                                      monkeypatch):
    _team(tmp_path / "base" / "tpl", {"train.py.j2": shipped()["train.py.j2"].text + "# base's\n"})
    _team(tmp_path / "cli", {"train.py.j2": shipped()["train.py.j2"].text + "# the command line's\n"})
    write_spec(f"extends: {JOBS / 'llama7b.yaml'}\ntemplates: tpl\n", "base/base.yaml")
    child = write_spec("extends: base/base.yaml\nname: child\n", "child.yaml")
    monkeypatch.chdir(tmp_path / "base")  # not where either folder is relative to
    loaded = load_spec(child)
    assert loaded.templates_dir == str((tmp_path / "base" / "tpl").resolve())
    assert build_plan(loaded).source.files["train.py"].endswith("# base's\n")
    monkeypatch.chdir(tmp_path)
    overridden = load_spec(child, ["templates=cli"])  # --set (and --templates): relative to the current folder
    assert build_plan(overridden).source.files["train.py"].endswith("# the command line's\n")
    with pytest.raises(SpecError) as err:
        load_spec(child, ["templates=nowhere"])
    assert "templates: 'nowhere' is not a folder of templates" in str(err.value)
    assert str(tmp_path / "nowhere") in str(err.value)


def test_plan_and_render_say_which_templates_they_used(tmp_path, run_cli):
    team = _team(tmp_path / "team", {"requirements.txt.j2": shipped()["requirements.txt.j2"].text + "einops>=0.7\n"})
    r = run_cli("plan", str(JOBS / "llama7b.yaml"), "--templates", str(team), "--output", "json")
    assert r.code == 0, r.err
    used = json.loads(r.out)["templates"]
    assert used["requirements.txt.j2"].endswith("requirements.txt.j2") and used["train.py.j2"] == "shipped"
    r = run_cli("plan", str(JOBS / "llama7b.yaml"), "--templates", str(team))
    assert r.code == 0 and "templates" in r.out and "requirements.txt.j2 from" in r.out
    assert "the others shipped" in r.out
    r = run_cli("render", str(JOBS / "llama7b.yaml"), "--templates", str(team), "--out", str(tmp_path / "out"))
    assert r.code == 0 and "templates: requirements.txt.j2 from" in r.out
    assert (tmp_path / "out" / "requirements.txt").read_text().endswith("einops>=0.7\n")
    r = run_cli("render", str(JOBS / "llama7b.yaml"), "--out", str(tmp_path / "out2"), "--output", "json")
    assert json.loads(r.out)["templates"] == dict.fromkeys(shipped().names, "shipped")
    r = run_cli("plan", str(JOBS / "llama7b.yaml"))
    assert "templates" in r.out and "shipped" in r.out


def _shipped_with(name: str, old: str, new: str) -> str:
    text = shipped()[name].text
    assert old in text
    return text.replace(old, new, 1)


BROKEN = {  # a team template -> (file, line or None, words of the one line)
    "a Jinja syntax error": ({"train.py.j2": "import os\n\n{% if %}\n"}, "train.py.j2", 3,
                             "does not render: Expected an expression"),
    "an undefined name": ({"train.py.j2": "import os\nX = 1\nY = {{ team_setting|py }}\n"}, "train.py.j2", 3,
                          "does not render: 'team_setting' is undefined"),
    "an undefined attribute": ({"train_secrets.py.j2": "S = {{ secrets.vault|py }}\n"}, "train_secrets.py.j2", 1,
                               "does not render: 'dict object' has no attribute 'vault'"),
    "Python that does not compile": ({"train.py.j2": "import os\ndef main(:\n    pass\n"}, "train.py.j2", None,
                                     "the train.py it renders does not compile: invalid syntax (rendered line 2"),
    "a distribution that is not JSON": (
        {"distribution.json.j2": _shipped_with("distribution.json.j2", '"enabled": true},', '"enabled": true},,')},
        "distribution.json.j2", None, "renders text that is not JSON"),
    "a parameter SMP v2 does not have": (
        {"distribution.json.j2": _shipped_with("distribution.json.j2", '"parameters": {',
                                               '"parameters": {"ddp": true,')},
        "distribution.json.j2", None, "would refuse: smdistributed.modelparallel.parameters.ddp is not an SMP v2"),
    "a degree that is not the spec's": (
        {"distribution.json.j2": _shipped_with("distribution.json.j2",
                                                "{{ smp.tensor_parallel_degree|json }}", "2")},
        "distribution.json.j2", None, "tensor_parallel_degree 2 is not the spec's smp.tensor_parallel_degree (1)"),
    "a key written twice": (
        {"distribution.json.j2": _shipped_with("distribution.json.j2", '"enabled": true},',
                                               '"enabled": true, "enabled": true},')},
        "distribution.json.j2", None, "renders JSON smp-launch refuses: key 'enabled' is written twice"),
    "a misnamed template": ({"train.j2": "x = 1\n"}, "train.j2", None, "no shipped template is named train.j2; "
                                                                        "did you mean train.py.j2?"),
    "a folder without templates": ({"README.md": "ours\n"}, "", None, "holds no template (*.j2); a team template "
                                                                      "replaces one of: distribution.json.j2, "),
    "a folder named like a template": ({"train.py.j2": None}, "train.py.j2", None, "is not a regular file"),
    "a template past the size limit": ({"train.py.j2": "#" * (MAX_TEMPLATE_BYTES + 1)}, "train.py.j2", None,
                                       f"is {MAX_TEMPLATE_BYTES + 1} bytes; a template may have at most "
                                       f"{MAX_TEMPLATE_BYTES}"),
    "a template that is not UTF-8": ({"train.py.j2": b"x = 1\n\xff\n"}, "train.py.j2", None,
                                     "is not UTF-8 text (byte 6)"),
    "an include of a template that does not exist": ({"train.py.j2": "import os\n{% include 'extra.py.j2' %}\n"},
                                                     "train.py.j2", 2, "does not render: extra.py.j2"),
}


@pytest.mark.parametrize("command", ["submit", "plan", "validate"])
@pytest.mark.parametrize("case", BROKEN, ids=str)
def test_a_team_template_that_fails_is_one_line_exit_2_before_any_aws_call(case, command, tmp_path, run_cli,
                                                                            monkeypatch):
    import socket

    import boto3

    def refuse(*_a, **_k):
        raise AssertionError("a failing template reached AWS")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(boto3.session.Session, "client", refuse)
    texts, file, line, words = BROKEN[case]
    team = _team(tmp_path / "team", texts)
    r = run_cli(command, str(JOBS / "llama7b.yaml"), "--templates", str(team))
    assert r.code == 2, (r.out, r.err)
    assert "Traceback" not in r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1, r.err
    path = shown_path((team / file).resolve())
    assert lines[0].startswith(f"{path}:{line}: " if line else f"{path}: "), lines[0]
    assert words in lines[0], lines[0]


def test_team_templates_read_through_the_api_refuse_what_the_cli_refuses(tmp_path, monkeypatch):
    """load_templates is the API's way in too: a missing folder or a file the OS cannot read is one
    TemplateError naming it, a template the set lacks is a KeyError, and Jinja lists the set's names."""
    from pathlib import Path

    from launcher.render.templates import TemplateError, environment, load_templates

    with pytest.raises(TemplateError, match="is not a folder of templates"):
        load_templates(tmp_path / "missing")
    team = _team(tmp_path / "team", {"train.py.j2": "x = 1\n"})

    def unreadable(self):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(Path, "read_bytes", unreadable)
    with pytest.raises(TemplateError) as err:
        load_templates(team)
    assert str(err.value).endswith("train.py.j2: cannot be read: Input/output error")
    monkeypatch.undo()
    loaded = load_templates(team)
    assert loaded["train.py.j2"].text == "x = 1\n" and not loaded["train.py.j2"].shipped
    with pytest.raises(KeyError):
        loaded["extra.py.j2"]
    assert environment(loaded).list_templates() == loaded.names == shipped().names


def test_only_plain_data_becomes_a_literal_and_other_failures_are_not_blamed_on_a_template(monkeypatch):
    from launcher.render import templates
    from launcher.render.files import py_literal

    with pytest.raises(TypeError, match="cannot write object into a rendered script"):
        py_literal({"a": [1, object()]})

    def broken(_templates):
        raise RuntimeError("not a template's fault")

    monkeypatch.setattr(templates, "environment", broken)
    with pytest.raises(RuntimeError, match="not a template's fault"):
        templates.render(shipped(), "train.py.j2", {})


def test_an_upload_never_overwrites_what_it_could_not_check(monkeypatch):
    """HeadObject refused (403) is not 'absent': the error stands and nothing is put over the object."""
    from botocore.exceptions import ClientError

    from launcher.render.source import upload

    class S3:
        puts = 0

        def head_object(self, **_kw):
            raise ClientError({"Error": {"Code": "403", "Message": "Forbidden"}}, "HeadObject")

        def put_object(self, **_kw):
            S3.puts += 1

    with pytest.raises(ClientError):
        upload(S3(), "s3://bucket/smp/code/abc/sourcedir.tar.gz", b"x")
    assert S3.puts == 0


def test_render_takes_what_it_needs_and_imports_nothing_above_it():
    """render sits below plan: it is handed the spec, the decisions and the documents, and never imports the
    plan (nor anything that uses a plan), TYPE_CHECKING imports included."""
    above = ("launcher.plan", "launcher.submission", "launcher.jobs", "launcher.orchestrate", "launcher.local",
             "launcher.cli", "launcher.api")
    for path in sorted((REPO / "launcher" / "render").glob("*.py")):
        tree = ast.parse(path.read_text())
        names = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not [n for n in names if n.startswith(above)], f"{path.name} imports {sorted(names)}"


def test_what_submit_uploads_is_rendered_from_the_team_template(moto_world, tmp_path, monkeypatch):
    """Through the public API against moto: the tarball holds the team's script and the job carries the hash
    that covers it."""
    import io
    import tarfile

    import launcher

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    team = _team(tmp_path / "team", {"train.py.j2": shipped()["train.py.j2"].text + TEAM_MARK})
    loaded = launcher.load_spec(str(JOBS / "llama7b.yaml"), {"templates": str(team), "role": "Good"})
    plan = launcher.build_plan(loaded, region="us-west-2")
    result = launcher.submit(plan, skip_role_check=True)
    bucket, key = result.source_uri[len("s3://"):].split("/", 1)
    body = moto_world.session.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        assert tar.extractfile("train.py").read().decode().endswith(TEAM_MARK)
        stored = json.loads(tar.extractfile("plan.json").read())
    assert stored["templates"]["train.py.j2"] == "team" and stored["spec_hash"] == plan.spec_hash
    tags = moto_world.sagemaker.list_tags(ResourceArn=moto_world.sagemaker.describe_training_job(
        TrainingJobName=result.job_name)["TrainingJobArn"])["Tags"]
    assert {"Key": "smp-launch:spec-hash", "Value": plan.spec_hash} in tags


def test_validate_json_gives_a_failing_team_template_as_a_problem_of_its_spec(tmp_path, run_cli):
    texts, _, _, words = BROKEN["a Jinja syntax error"]
    team = _team(tmp_path / "team", texts)
    spec = str(JOBS / "llama7b.yaml")
    r = run_cli("validate", spec, "--templates", str(team), "--output", "json")
    (row,) = json.loads(r.out)
    assert r.code == 2 and row["valid"] is False and len(row["errors"]) == 1 and words in row["errors"][0]
    assert row["problems"] == [{"file": spec, "line": 1, "column": 1, "path": "", "message": row["errors"][0]}]
