"""tests/conftest.py gives every test one kind (unit, e2e, local) and keeps a shared-fixture module on one worker."""
from types import SimpleNamespace

from tests.conftest import KINDS, kind_of, pytest_xdist_make_scheduler


def fake_item(module: str, fixtures=(), marks=()):
    return SimpleNamespace(module=SimpleNamespace(__name__=f"tests.{module}"), fixturenames=list(fixtures),
                           iter_markers=lambda: [SimpleNamespace(name=m) for m in marks])


def test_a_test_gets_its_kind_from_its_mark_its_module_or_its_fixtures():
    assert kind_of(fake_item("test_plan")) == "unit"  # no rule matches: unit, unmarked by anyone
    assert kind_of(fake_item("test_plan", fixtures=["moto_world", "tmp_path"])) == "unit"
    assert kind_of(fake_item("test_logs_e2e")) == "e2e"
    assert kind_of(fake_item("test_reliability_short")) == "e2e"
    assert kind_of(fake_item("test_someone_adds", fixtures=["moto_server"])) == "e2e"
    assert kind_of(fake_item("test_local_preflight")) == "local"
    assert kind_of(fake_item("test_tensor_parallel_local")) == "local"
    assert kind_of(fake_item("test_plan", marks=["parametrize", "local"])) == "local"  # a hand-set kind wins
    assert kind_of(fake_item("test_local_preflight", marks=["e2e"])) == "e2e"


def test_every_collected_test_has_exactly_one_kind(request):
    for item in request.session.items:
        assert [m.name for m in item.iter_markers() if m.name in KINDS] == [kind_of(item)], item.nodeid


def test_a_shared_fixture_module_is_one_unit_of_work_for_the_scheduler():
    config = SimpleNamespace(getvalue=lambda name: {"dist": "loadgroup", "tx": ["2*popen"]}.get(name),
                             option=SimpleNamespace(maxschedchunk=None))
    scheduler = pytest_xdist_make_scheduler(config, None)
    tp = "tests/test_tensor_parallel_local.py"
    assert {scheduler._split_scope(f"{tp}::test_{n}") for n in ("a", "b[1]")} == {tp}
    other = "tests/test_local_preflight.py::test_tiny_preflight_of_each_reference_job[llama7b.yaml]"
    assert scheduler._split_scope(other) == other  # every other test is scheduled on its own
    assert pytest_xdist_make_scheduler(SimpleNamespace(getvalue=lambda name: "load"), None) is None


def test_no_module_gives_a_shared_fixture_name_another_meaning():
    """A fixture conftest.py defines means the same in every module: only `make_world` (what the shared worlds
    build) is meant to be replaced by a module, with another function of a Session."""
    import ast

    from tests.conftest import REPO

    def fixtures(path):
        tree = ast.parse(path.read_text())
        return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)
                and any("fixture" in ast.unparse(d) for d in node.decorator_list)}

    shared = fixtures(REPO / "tests" / "conftest.py")
    assert {"moto_world", "server_world", "server_cli", "make_world", "clock"} <= shared
    redefined = {path.name: fixtures(path) & shared for path in sorted((REPO / "tests").glob("test_*.py"))}
    assert {name: found for name, found in redefined.items() if found - {"make_world"}} == {}
