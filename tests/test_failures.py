"""Failure classes from the texts SageMaker writes (tests/fixtures/failure_reasons, each with its public source)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from launcher.jobs import failures, stored
from launcher.jobs.failures import classify

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "failure_reasons").glob("*.json"))


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def _classify(case: dict, **kw):
    return classify(case["status"], case["failure_reason"], [tuple(t) for t in case["transitions"]],
                    case["log_tail"], secondary_status=case.get("secondary_status"), **kw)


def test_every_class_has_a_fixture_from_a_public_source():
    cases = [_load(p) for p in FIXTURES]
    assert {c["expected"] for c in cases} == set(failures.FailureClass) - {failures.FailureClass.UNKNOWN}
    for case in cases:
        assert case["source"].startswith("https://"), case


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_fixture_is_classified(path):
    case = _load(path)
    found = _classify(case)
    assert found is not None and found.failure_class == case["expected"], found
    assert found.remedy and found.evidence
    if "exit_code" in case:
        assert f"exit code {case['exit_code']}" in found.remedy


def test_user_error_quotes_the_last_traceback_lines():
    tail = ["step 10 loss 2.3", "Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
            "    main()", "KeyError: 'input_ids'"]
    found = classify("Failed", "AlgorithmError: ExecuteUserScriptError:\nExitCode 1", log_tail=tail)
    assert found.failure_class == "user_error"
    assert "exit code 1" in found.remedy and "KeyError: 'input_ids'" in found.remedy
    assert any("KeyError" in e for e in found.evidence)


def test_not_failed_is_no_failure():
    assert classify("Completed", None) is None
    assert classify("InProgress", None) is None
    assert classify("Stopped", None, [("Training", "x"), ("Stopping", "y")], secondary_status="Stopped") is None


def test_a_spot_job_a_person_stopped_is_not_a_failure():
    steps = [("Training", "x"), ("Interrupted", "The job stopped because the managed spot training instances were "
                                               "interrupted."), ("Starting", "y"), ("Stopping", "z")]
    assert classify("Stopped", None, steps, secondary_status="Stopped") is None


def test_unrecognised_reason_is_unknown():
    found = classify("Failed", "InternalServerError: We encountered an internal error. Please try again.")
    assert found.failure_class == "unknown" and "InternalServerError" in found.reason


def test_hostile_reason_is_escaped_and_bounded():
    reason = "\x1b]0;pwned\x07\x1b[31mCapacity\x1b[0mError: Unable to provision\u202e " + "A" * 100_000
    found = classify("Failed", reason)
    assert found.failure_class == "capacity"  # escapes removed before matching: they cannot split a keyword
    assert len(found.reason) <= failures.REASON_LIMIT
    for text in (found.reason, *found.evidence):
        assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
        assert len(text) <= failures.REASON_LIMIT


def test_hostile_log_tail_is_bounded():
    tail = ["x" * 1_000_000] * 5 + ["\x1b[1mtorch.OutOfMemoryError\x1b[0m: CUDA out of memory\r\n\x00"]
    found = classify("Failed", "AlgorithmError: ExitCode 1", log_tail=tail)
    assert found.failure_class == "out_of_memory"
    assert all(len(e) <= failures.EVIDENCE_LIMIT and "\x1b" not in e and "\x00" not in e for e in found.evidence)


def test_oom_before_nccl_when_both_appear():
    tail = ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout"]
    assert classify("Failed", "AlgorithmError: ExitCode 1", log_tail=tail).failure_class == "out_of_memory"


def test_service_errors_win_over_quoted_text():
    reason = "ClientError: Data download failed (AccessDenied: Access Denied) while reading CUDA out of memory.txt"
    assert classify("Failed", reason).failure_class == "permissions"


def _plan_json(spec: str = "jobs/llama7b.yaml") -> dict:
    import launcher
    from launcher.plan.bundle import deterministic_plan

    return json.loads(json.dumps(deterministic_plan(launcher.build_plan(launcher.load_spec(spec)))))


def test_oom_remedy_names_a_layout_the_memory_model_gives_room():
    plan = _plan_json()
    found = classify("Failed", "AlgorithmError: ExitCode 1", log_tail=["torch.OutOfMemoryError: CUDA out of memory"],
                     plan=plan)
    assert found.failure_class == "out_of_memory"
    assert "smp.tensor_parallel_degree: 2" in found.remedy and "27.5 of 40 GB" in found.remedy
    assert found.remedy != failures.REMEDIES[failures.FailureClass.OUT_OF_MEMORY]


def test_oom_remedy_degrades_to_the_generic_one_without_a_usable_plan():
    tail = ["torch.OutOfMemoryError: CUDA out of memory"]
    for plan in ({}, {"model": {"type": "llama"}}, {"model": None}):
        found = classify("Failed", "AlgorithmError: ExitCode 1", log_tail=tail, plan=plan)
        assert found.remedy == failures.REMEDIES[failures.FailureClass.OUT_OF_MEMORY]


class _Body:
    def __init__(self, data: bytes):
        self.data = data

    def read(self, n: int = -1) -> bytes:
        return self.data if n < 0 else self.data[:n]


class _S3:
    def __init__(self, data: bytes, length: int | None = None):
        self.data, self.length = data, length

    def get_object(self, Bucket, Key):  # noqa: N803 - boto3's names
        return {"ContentLength": len(self.data) if self.length is None else self.length, "Body": _Body(self.data)}


class _Clients:
    def __init__(self, s3):
        self.s3 = s3


def _tarball(files: dict[str, bytes]) -> bytes:
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


DESC = {"HyperParameters": {"sagemaker_submit_directory": '"s3://b/code/abc/sourcedir.tar.gz"'}}


def test_job_plan_reads_plan_json_from_the_source_tarball():
    data = _tarball({"train.py": b"print()", "plan.json": b'{"world_size": 8}'})
    assert failures.job_plan(_Clients(_S3(data)), DESC) == {"world_size": 8}


@pytest.mark.parametrize("s3,desc", [
    (_S3(_tarball({"train.py": b""})), DESC),                                    # no plan.json
    (_S3(b"not a tarball"), DESC),                                                # garbage
    (_S3(_tarball({"plan.json": b"[1, 2]"})), DESC),                              # not an object
    (_S3(b"x", length=stored.MAX_TARBALL + 1), DESC),                    # too big to read
    (_S3(_tarball({"plan.json": b"{}"})), {"HyperParameters": {}}),               # not launched by this tool
    (_S3(_tarball({"plan.json": b"{}"})), {"HyperParameters": {"sagemaker_submit_directory": '"/etc/x"'}}),
])
def test_job_plan_is_optional_and_never_raises(s3, desc):
    assert failures.job_plan(_Clients(s3), desc) is None


def test_job_plan_refuses_an_oversized_plan_json():
    data = _tarball({"plan.json": b"{" + b" " * (stored.MAX_JSON + 10) + b"}"})
    assert failures.job_plan(_Clients(_S3(data)), DESC) is None


def test_log_tail_cannot_tell_without_logs():
    class Broken:
        @property
        def logs(self):
            raise RuntimeError("no logs client")

    assert failures.log_tail(Broken(), "job") == []
