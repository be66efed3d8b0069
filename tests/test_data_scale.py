"""Token files at scale: each rank reads only the rows of its own batches, so its memory does not grow
with the corpus (benchmarks/bench_data.py measures it on 0.1 to 4 GB)."""
import importlib
import importlib.util
import json
import os
import sys
import tracemalloc

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="the runtime modules need the `local` extra")


@pytest.fixture
def data():
    sys.modules.pop("launcher.runtime.train_data", None)
    yield importlib.import_module("launcher.runtime.train_data")
    sys.modules.pop("launcher.runtime.train_data", None)


def _peak_bytes(fn):
    """Peak bytes Python and numpy allocated while fn ran (numpy reports its buffers to tracemalloc)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_an_npy_corpus_is_read_row_by_row_not_loaded(data, tmp_path):
    """8 Mi int32 tokens (32 MiB): loading them as int64 would take 64 MiB; the reader holds a few rows."""
    channel = tmp_path / "train"
    channel.mkdir()
    for i in range(2):
        np.save(channel / f"part{i}.npy", np.arange(i << 22, (i + 1) << 22, dtype=np.int32))

    def read():
        batches = data.TokenFileBatches(str(channel), "npy", 1024, 4, seed=0, dp_rank=1, dp_size=2)
        for step in range(1, 20):
            rows = batches.batch(step)
            assert rows.shape == (4, 1024) and bool((rows[:, 1:] - rows[:, :-1] == 1).all())

    assert _peak_bytes(read) < 1 << 20


def test_json_lines_are_converted_a_chunk_at_a_time(data, tmp_path):
    """1 Mi tokens of JSON lines: the whole stream as int64 is 8 MiB; the conversion holds one chunk."""
    channel, cache = tmp_path / "train", tmp_path / "cache"
    channel.mkdir()
    with open(channel / "a.jsonl", "w", encoding="utf-8") as f:
        for start in range(0, 1 << 20, 512):
            f.write(json.dumps({"input_ids": list(range(start, start + 512))}) + "\n")

    def read():
        batches = data.TokenFileBatches(str(channel), "jsonl", 512, 2, seed=0, dp_rank=0, dp_size=1,
                                        cache_dir=str(cache))
        assert batches.rows == 2048 and int(batches.batch(1)[0, 0]) % 512 == 0

    assert _peak_bytes(read) < 3 << 20
    cached = sorted(cache.iterdir())
    assert len(cached) == 1 and cached[0].stat().st_size == 4 << 20  # int32 tokens
    assert cached[0].read_bytes()[:8] == np.arange(2, dtype=np.int32).tobytes()
    before = cached[0].stat().st_mtime_ns
    data.TokenFileBatches(str(channel), "jsonl", 512, 2, seed=0, dp_rank=0, dp_size=1, cache_dir=str(cache))
    assert cached[0].stat().st_mtime_ns == before  # converted once per host, then read row by row
    with open(channel / "a.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"input_ids": [1, 2, 3]}) + "\n")
    os.utime(channel / "a.jsonl", ns=(before + 10**9, before + 10**9))
    data.prepare(str(channel), "jsonl", str(cache))
    assert len(list(cache.glob("*.tokens"))) == 2  # a changed file gets a new cache


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 1000, 4099])
def test_the_shuffle_is_a_permutation_computed_row_by_row(data, n):
    order = [data.permuted(i, n, key=42) for i in range(n)]
    assert sorted(order) == list(range(n))
    if n >= 64:
        assert order != list(range(n)) and order != [data.permuted(i, n, key=43) for i in range(n)]


def test_bad_token_files_are_refused_with_their_path(data, tmp_path):
    channel = tmp_path / "train"
    channel.mkdir()
    np.save(channel / "a.npy", np.zeros((4, 8), dtype=np.float32))
    with pytest.raises(ValueError, match="a.npy: token ids must be integers"):
        data.TokenFileBatches(str(channel), "npy", 8, 1, seed=0, dp_rank=0, dp_size=1)
    np.save(channel / "a.npy", np.asfortranarray(np.zeros((4, 8), dtype=np.int32)))
    with pytest.raises(ValueError, match="C order"):
        data.TokenFileBatches(str(channel), "npy", 8, 1, seed=0, dp_rank=0, dp_size=1)


def test_the_script_converts_once_per_host_before_the_ranks_read(tmp_path, monkeypatch):
    from launcher.plan.build import build_plan
    from launcher.spec import load_spec
    from tests.conftest import JOBS

    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/smp-launch-test")
    script = build_plan(load_spec(JOBS / "llama7b.yaml", ["data.train=s3://b-1/tokens/"])).source.files["train.py"]
    body = script[script.index("def make_batches"):script.index("def forward(")]
    prepare, barrier, read = (body.index(s) for s in ("train_data.prepare(", "dist.barrier()", "TokenFileBatches("))
    assert 'os.environ.get("LOCAL_RANK", 0)' in body and prepare < barrier < read
