"""Rendering the source dir: goldens, valid Python, determinism, the progress line, and no code from specs."""
import ast
import difflib
import json
import re
from datetime import datetime, timezone

import pytest
import yaml

from launcher.plan.build import build_plan
from launcher.render import progress
from launcher.render.files import RUNTIME_MODULES, SOURCE_TEMPLATES
from launcher.spec import load_spec
from tests.conftest import JOBS, REPO

GOLDENS = REPO / "tests" / "goldens"
EXAMPLE_JOBS = sorted(JOBS.glob("*.yaml"))
EXPECTED_FILES = {*SOURCE_TEMPLATES, *RUNTIME_MODULES, "distribution.json", "plan.json", "spec.json"}
RUNTIME = REPO / "launcher" / "runtime"


@pytest.fixture(autouse=True)
def _golden_env(monkeypatch):
    """The environment `make goldens` renders in: no bucket, role or profile from the developer's shell."""
    for var in ("SMP_LAUNCH_BUCKET", "SMP_LAUNCH_ROLE", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize("job", EXAMPLE_JOBS, ids=lambda p: p.stem)
def test_rendered_source_matches_the_goldens(job):
    files = build_plan(load_spec(job)).source.files
    golden_dir = GOLDENS / job.stem
    assert golden_dir.is_dir(), f"no goldens for {job.name}: run `make goldens`"
    golden = {p.name: p.read_text(encoding="utf-8") for p in golden_dir.iterdir()}
    golden.update((name, (RUNTIME / name).read_text(encoding="utf-8")) for name in RUNTIME_MODULES)
    assert set(files) == set(golden) == EXPECTED_FILES, "run `make goldens` and review the diff"
    for name, content in files.items():
        if content != golden[name]:
            diff = "".join(difflib.unified_diff(golden[name].splitlines(True), content.splitlines(True),
                                                f"goldens/{job.stem}/{name}", "rendered", n=1))
            pytest.fail(f"{job.stem}/{name} drifted from its golden (run `make goldens`):\n{diff[:3000]}")


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
    assert "tsm.transform(model)" in script  # tensor parallel degree 4
    assert "DelayedParamIniter" in script and "offload_wrapper(fsdp_model)" in script
    order = [script.index(s) for s in ("import smdistributed.dataparallel.torch.torch_smddp",
                                        "dist.init_process_group(backend=backend", "    tsm.init()\n")]
    assert order == sorted(order)  # SMDDP, then the process group, then SMP
    overrides = ["smp.backend=nccl", "model.use_smp_implementation=false"]
    nccl = build_plan(load_spec(JOBS / "llama7b.yaml", overrides)).source.files
    assert "smddp" not in nccl["train.py"] and "tsm.transform(" not in nccl["train.py"]
    assert "DelayedParamIniter" not in nccl["train.py"]
    default = build_plan(load_spec(JOBS / "llama7b.yaml")).source.files["train.py"]
    assert "tsm.transform(model)" in default


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
    r = run_cli("render", str(JOBS / "llama70b.yaml"), "-o", str(out), "--output", "json")
    assert r.code == 0, r.err
    assert set(json.loads(r.out)["files"]) == EXPECTED_FILES
    assert {p.name for p in out.iterdir()} == EXPECTED_FILES
    assert (out / "train.py").read_text() == (GOLDENS / "llama70b" / "train.py").read_text()
    r = run_cli("render", str(JOBS / "llama70b.yaml"), "-o", str(tmp_path / "t"), "--set", "smp.bogus=1")
    assert r.code == 2 and "bogus" in r.err


def _render_with(overrides: list[str], **decisions: object) -> dict[str, str]:
    """The source dir with some of the plan's decisions forced: the script follows what it is given."""
    import dataclasses

    from launcher.render.files import render_template, script_context

    plan = build_plan(load_spec(JOBS / "llama7b.yaml", overrides))
    forced = dataclasses.replace(plan, decisions=dataclasses.replace(plan.decisions, **decisions))
    context = script_context(forced)
    return {name: render_template(template, **context) for name, template in SOURCE_TEMPLATES.items()}


def _function(source: str, name: str) -> str:
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    return ast.get_source_segment(source, node)


@pytest.mark.parametrize("transform", [True, False])
def test_the_implementation_in_use_picks_the_wrapped_block_and_the_clipping(transform):
    """SMP's implementation at TP=1 too: its TransformerLayer is what FSDP wraps and checkpoints, and SMP's
    clip_grad_norm_ clips; without it, Hugging Face's block and FSDP's own clip."""
    script = _render_with([], transform=transform)["train.py"]
    compile(script, "train.py", "exec")
    layer, clip = _function(script, "layer_class"), _function(script, "clip_gradients")
    assert ("TransformerLayer" in layer) is transform
    assert ("torch.sagemaker.grad_norm" in clip) is transform
    assert ("fsdp_model.clip_grad_norm_" in clip) is not transform
    assert ("model = transform(model)" in script) is transform
    assert "tsm.clip_grad_norm_(fsdp_model, max_norm)" in clip  # the local stand-in emulates SMP's either way
    assert "layer_cls = layer_class()" in _function(script, "wrap")  # FSDP wraps what AC checkpoints
    assert "isinstance(m, layer_cls)" in _function(script, "train")


def test_a_moe_model_is_transformed_on_the_meta_device_and_keeps_its_block():
    """AWS's examples: with delayed init, MoE's tsm.transform runs under init_empty_weights, and FSDP
    wraps Hugging Face's MixtralDecoderLayer, not SMP's TransformerLayer."""
    moe = ["model.preset=mixtral-8x7b", "smp.expert_parallel_degree=2", "smp.hybrid_shard_degree=4",
           "cluster.instance_type=ml.p4de.24xlarge"]
    script = _render_with([*moe, "smp.delayed_param_init=true"], transform=True)["train.py"]
    body = _function(script, "transform")
    withs = [n for n in ast.walk(ast.parse(body)) if isinstance(n, ast.With)]
    assert [ast.unparse(w.items[0].context_expr) for w in withs] == ["init_empty_weights()"]
    assert ast.unparse(withs[0].body[0]) == "return tsm.transform(model, config=moe)"
    assert "TransformerLayer" not in _function(script, "layer_class")
    pretrained = _render_with([*moe, "model.pretrained=mistralai/Mixtral-8x7B-v0.1"], transform=True)["train.py"]
    body = _function(pretrained, "transform")
    assert "use_cpu_initialization=dist.get_rank() == 0" in body and "if dist.get_rank() != 0:" in body


def test_the_group_timeout_and_checkpoint_layout_are_awss():
    files = build_plan(load_spec(JOBS / "llama175b.yaml")).source.files
    script, ckpt = files["train.py"], files["train_checkpoint.py"]
    assert "timeout=timedelta(seconds=7200)" in script
    layout = _function(script, "checkpoint_layout")
    assert "st.ranker.get_rep_rank(dist.get_rank()) == 0" in layout and "fsdp_model.process_group" in layout
    save = _function(ckpt, "save")
    assert "if layout.writer:" in save and "process_group=layout.group" in save
    assert 'f"tp{layout.tp_degree}-{layout.tp_rank}"' in _function(ckpt, "shard_dir")
    export = _function(script, "save_final_model")
    assert "FULL_STATE_DICT" in export and "rank0_only=True" in export and "pytorch_model.bin" in export


def test_weight_decay_spares_norms_and_biases(tmp_path, monkeypatch):
    """AWS's parameter groups: LayerNorm/RMSNorm weights and every bias get no weight decay."""
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

    class LlamaRMSNorm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(4))

    model = torch.nn.ModuleDict({"embed": torch.nn.Embedding(8, 4), "proj": torch.nn.Linear(4, 4),
                                 "ln": torch.nn.LayerNorm(4), "rms": LlamaRMSNorm(),
                                 "fused": torch.nn.Module()})
    model["fused"].layer_norm_weight = torch.nn.Parameter(torch.ones(4))  # Transformer Engine's naming
    decay, no_decay = train.param_groups(model)
    named = {id(p): n for n, p in model.named_parameters()}
    assert sorted(named[id(p)] for p in decay["params"]) == ["embed.weight", "proj.weight"]
    assert sorted(named[id(p)] for p in no_decay["params"]) == [
        "fused.layer_norm_weight", "ln.bias", "ln.weight", "proj.bias", "rms.weight"]
    assert decay["weight_decay"] == train.WEIGHT_DECAY > 0 and no_decay["weight_decay"] == 0.0
    for name in ("train", "train_data", "train_checkpoint", "tsm_local"):
        sys.modules.pop(name, None)


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
