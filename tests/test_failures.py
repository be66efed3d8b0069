"""Failure classes from the texts SageMaker writes (tests/fixtures/failure_reasons, each with its public source)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from launcher.jobs import failure_rules, failures, stored
from launcher.jobs.failures import classify

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "failure_reasons").glob("*.json"))
CORPUS = json.loads((Path(__file__).parent / "fixtures" / "failure_corpus.json").read_text())["cases"]
CORPUS_2 = json.loads((Path(__file__).parent / "fixtures" / "failure_corpus_2.json").read_text())["cases"]
ROUNDS = [c for p in sorted((Path(__file__).parent / "fixtures").glob("failure_heldout_round*.json"))
          for c in json.loads(p.read_text())["cases"]]


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def _classify(case: dict, **kw):
    return classify(case["status"], case["failure_reason"], [tuple(t) for t in case["transitions"]],
                    case["log_tail"], secondary_status=case.get("secondary_status"), **kw)


def test_every_class_has_a_fixture_from_a_public_source():
    cases = [_load(p) for p in FIXTURES] + CORPUS + CORPUS_2 + ROUNDS
    assert {c["expected"] for c in cases} == set(failures.FailureClass)
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
    found = classify("Failed", "SomeNewError: the service changed its wording")
    assert found.failure_class == "unknown" and "SomeNewError" in found.reason


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
        assert found.remedy.startswith(failures.REMEDIES[failures.FailureClass.OUT_OF_MEMORY])


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


# -- the corpus: real failure texts from public pages (tests/fixtures/failure_corpus.json) ------------------

# The cases the classifier does not class as their page says, and why. A new miss fails the test below; so does
# a miss that is fixed without being taken off this list.
KNOWN_MISSES = {
    # cuDNN raises CUDNN_STATUS_INTERNAL_ERROR for a faulty GPU but also when it cannot get workspace memory or
    # meets a mismatched library: classing it hardware would retry a script's own bug on every attempt.
    "hardware-cudnn-internal": "unknown",
}
CORPUS_FLOOR = 66  # of 67 cases classed as their source says


def _corpus_class(case: dict) -> str | None:
    found = _classify(case)
    return found.failure_class.value if found else None


def test_corpus_is_real_and_cited():
    assert len(CORPUS) >= 60
    assert len({c["id"] for c in CORPUS}) == len(CORPUS)
    for case in CORPUS:
        assert case["source"].startswith("https://"), case["id"]
        assert case["expected"] in set(failures.FailureClass), case["id"]
        assert case["failure_reason"] or case["log_tail"] or case["transitions"] or case.get("secondary_status"), \
            case["id"]


def test_corpus_is_classed_right_but_for_the_known_misses():
    got = {c["id"]: _corpus_class(c) for c in CORPUS}
    misses = {c["id"]: got[c["id"]] for c in CORPUS if got[c["id"]] != c["expected"]}
    assert misses == KNOWN_MISSES
    assert sum(got[c["id"]] == c["expected"] for c in CORPUS) >= CORPUS_FLOOR


@pytest.mark.parametrize("case", [c for c in CORPUS if c["id"] not in KNOWN_MISSES], ids=lambda c: c["id"])
def test_corpus_remedy_quotes_the_deciding_line(case):
    found = _classify(case)
    assert found.evidence, case["id"]
    if found.failure_class != "user_error":
        assert "(decided by " in found.remedy
        assert found.evidence[0][:60] in found.remedy


# -- near misses: each of these would pass a classifier with a flipped comparison, order or pattern ----------

def test_internal_server_error_is_sagemakers_own_and_says_to_try_again():
    found = classify("Failed", "InternalServerError: We encountered an internal error. Please try again.")
    assert found.failure_class == "internal_error"
    assert 'SageMaker says: "Please try again."' in found.remedy
    # quoted inside a script's own error it is the script's failure, not SageMaker's
    quoted = classify("Failed", "AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "
                                "\"InternalServerError: We encountered an internal error\"")
    assert quoted.failure_class == "user_error" and "SageMaker says" not in quoted.remedy


def test_sagemakers_advice_is_quoted_only_from_its_own_reason():
    found = classify("Failed", "CapacityError: Unable to provision requested ML compute capacity. "
                               "Please retry using a different ML instance type.")
    assert 'SageMaker says: "Please retry using a different ML instance type."' in found.remedy
    user = classify("Failed", "AlgorithmError: AccessDenied. Please ask your admin.")
    assert user.failure_class == "permissions" and "SageMaker says" not in user.remedy


@pytest.mark.parametrize("line", [
    "step 403 loss 2.31 lr 0.000403",
    "epoch 12: saved 403 samples to s3://bucket/out/403/",
    "GET /health 200, retries=403",
])
def test_a_stray_403_is_not_a_permission_error(line):
    found = classify("Failed", "AlgorithmError: ExitCode 1", log_tail=[line])
    assert found.failure_class == "unknown" and "exit code 1" in found.remedy


@pytest.mark.parametrize("line", [
    "botocore.exceptions.ClientError: An error occurred (AccessDenied) when calling the PutObject operation: "
    "Access Denied",
    "botocore.exceptions.ClientError: An error occurred (403) when calling the HeadObject operation: Forbidden",
    "HTTP Error 403 Forbidden",
])
def test_permission_errors_are_read_in_the_log(line):
    found = classify("Failed", "AlgorithmError: ExitCode 1", log_tail=["Traceback (most recent call last):", line])
    assert found.failure_class == "permissions" and line[:40] in found.remedy


@pytest.mark.parametrize("echo", ["NCCL_TIMEOUT=7200", "export NCCL_TIMEOUT=7200",
                                  "[2026-01-02 10:00:00,001] [INFO] [launch.py:139:main] 0 NCCL_TIMEOUT=7200",
                                  'SM_HPS={"nccl_timeout": 7200, "oom_retry": "CUDA out of memory"}'])
def test_an_echoed_setting_never_outranks_the_real_error(echo):
    tail = [echo, "Traceback (most recent call last):", '  File "train.py", line 3', "KeyError: 'input_ids'"]
    found = classify("Failed", "AlgorithmError: ExecuteUserScriptError:\nExitCode 1", log_tail=tail)
    assert found.failure_class == "user_error" and "KeyError" in found.remedy
    assert not any("7200" in e for e in found.evidence)


def test_a_real_nccl_timeout_after_an_echo_is_still_one():
    tail = ["NCCL_TIMEOUT=7200",
            "[E ProcessGroupNCCL.cpp:523] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)"]
    found = classify("Failed", "AlgorithmError: ExitCode 1", log_tail=tail)
    assert found.failure_class == "nccl_timeout" and found.evidence == (
        "algo-1: [E ProcessGroupNCCL.cpp:523] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)",)


@pytest.mark.parametrize("reason,expected,code,meaning", [
    ("AlgorithmError: ExecuteUserScriptError:\nExitCode 137", "host_out_of_memory", 137, None),
    ("AlgorithmError: ExecuteUserScriptError:\nExitCode -9", "host_out_of_memory", -9, None),
    ("AlgorithmError: ExecuteUserScriptError:\nExitCode -90", "unknown", -90, None),
    ("AlgorithmError: ExecuteUserScriptError:\nExitCode 1370", "unknown", 1370, None),
    ("AlgorithmError: ExecuteUserScriptError:\nExitCode -11", "unknown", -11, "SIGSEGV"),
    ("AlgorithmError: ExecuteUserScriptError:\nExitCode 139", "unknown", 139, "SIGSEGV"),
    ("AlgorithmError: ExecuteUserScriptError:\nExitCode 134", "unknown", 134, "SIGABRT"),
    ("AlgorithmError: ExecuteUserScriptError:\nExitCode 9", "unknown", 9, None),
])
def test_an_exit_code_alone_names_no_cause_but_sigkill(reason, expected, code, meaning):
    """SageMaker's wrapper with only an exit code is `unknown`, saying the code, what signal it means and what to
    read; SIGKILL (137, -9) is the kernel's out-of-memory killer."""
    found = classify("Failed", reason)
    assert found.failure_class == expected and found.exit_code == code
    if expected == "unknown":
        assert f"exit code {code}" in found.remedy and "smp-launch logs JOB" in found.remedy
        assert (meaning in found.remedy) if meaning else "SIG" not in found.remedy.split("(decided by")[0]


def test_exit_code_comes_from_the_reason_before_the_log():
    found = classify("Failed", "AlgorithmError: ExitCode 2", log_tail=["worker exit code: 7", "exit code: 5"])
    assert found.exit_code == 2
    found = classify("Failed", "AlgorithmError:", log_tail=["worker exit code: 7", "exit code: 5"])
    assert found.exit_code == 5  # the last line that states one


def test_gpu_oom_from_other_libraries_and_host_oom_kept_apart():
    tf_gpu = "Resource exhausted: OOM when allocating tensor with shape[8,4096] and type float on " \
             "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc"
    tf_cpu = tf_gpu.replace("device:GPU:0", "device:CPU:0").replace("GPU_0_bfc", "cpu")
    assert classify("Failed", "", log_tail=[tf_gpu]).failure_class == "out_of_memory"
    assert classify("Failed", "", log_tail=[tf_cpu]).failure_class == "host_out_of_memory"
    jax = "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.00GiB."
    assert classify("Failed", "", log_tail=[jax]).failure_class == "out_of_memory"
    java = "java.lang.OutOfMemoryError: Java heap space"
    assert classify("Failed", "", log_tail=[java]).failure_class == "host_out_of_memory"
    assert classify("Failed", "", log_tail=["MemoryError"]).failure_class == "host_out_of_memory"


def test_gpu_oom_outranks_the_kill_and_the_timeouts_it_causes():
    tail = ["torch.OutOfMemoryError: CUDA out of memory.", "exitcode  : -9",
            "[E ProcessGroupNCCL.cpp:1] Watchdog caught collective operation timeout"]
    assert classify("Failed", "AlgorithmError: ExitCode 1", log_tail=tail).failure_class == "out_of_memory"
    assert classify("Failed", "AlgorithmError: ExitCode 1", log_tail=tail[1:]).failure_class == "host_out_of_memory"
    assert classify("Failed", "AlgorithmError: ExitCode 1", log_tail=tail[2:]).failure_class == "nccl_timeout"


@pytest.mark.parametrize("first,second,expected", [
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "Watchdog caught collective operation timeout",
     "hardware"),
    ("OSError: [Errno 28] No space left on device", "Watchdog caught collective operation timeout", "disk_full"),
    ("An error occurred (AccessDenied) when calling the PutObject operation", "Timeout at NCCL work: 3",
     "permissions"),
    ("standard_init_linux.go:219: exec user process caused: exec format error", "Traceback (most recent call last):",
     "image"),
])
def test_causes_outrank_their_symptoms_in_either_line_order(first, second, expected):
    for tail in ([first, second], [second, first]):
        assert classify("Failed", "AlgorithmError: ExitCode 1", log_tail=tail).failure_class == expected


@pytest.mark.parametrize("reason,expected", [
    ("ClientError: Artifact upload failed:Insufficient disk space", "disk_full"),
    ("ClientError: Data download failed:Insufficient disk space", "disk_full"),
    ("ClientError: Artifact upload failed:ClientError: Out of Memory. Please use a larger instance",
     "host_out_of_memory"),
    ('ClientError: Artifact upload failed:API error (400): OCI runtime create failed: exec: "train"', "image"),
    ("ClientError: Data download failed:Unable to download object s3://b/k (AccessDenied: Access Denied)",
     "permissions"),
    ("ClientError: Data download failed:Please ensure that the subnet's route table has a route to an S3 VPC "
     "endpoint or a NAT device", "data"),
    ("ClientError: Data download failed:Failed to download data. NoSuchKey", "data"),
    ("ClientError: SageMaker was unable to assume the role 'arn:aws:iam::1:role/R'", "permissions"),
])
def test_sagemaker_reason_wording_decides_before_its_prefix(reason, expected):
    found = classify("Failed", reason)
    assert found.failure_class == expected


def test_a_role_sagemaker_could_not_assume_gets_the_trust_policy_remedy():
    found = classify("Failed", "ClientError: SageMaker was unable to assume the role 'arn:aws:iam::1:role/R'")
    assert found.remedy.startswith(failures.ROLE_REMEDY) and "sts:AssumeRole" in found.remedy
    other = classify("Failed", "ClientError: AccessDenied on s3://b/k")
    assert other.remedy.startswith(failures.REMEDIES[failures.FailureClass.PERMISSIONS])


def test_max_runtime_is_sagemakers_stop_and_a_person_stop_is_not_a_failure():
    found = classify("Stopped", None, [("Training", "x"), ("Stopping", "y")], secondary_status="MaxRuntimeExceeded")
    assert found.failure_class == "max_runtime"
    assert "cluster.max_run" in found.remedy and "rerun" in found.remedy
    assert classify("Stopped", None, [("Training", "x")], secondary_status="Stopped") is None
    assert classify("Completed", None, secondary_status="MaxRuntimeExceeded") is None


def test_the_toolkits_wrapper_in_the_log_names_no_cause_but_a_failed_install_does():
    tail = ["2019-02-25 17:22:36,331 sagemaker-containers ERROR ExecuteUserScriptError:", 'Command "python x.py"']
    assert classify("Failed", "", log_tail=tail).failure_class == "unknown"
    install = ["sagemaker-containers ERROR InstallModuleError:", 'Command "python -m pip install -r requirements.txt"']
    found = classify("Failed", "", log_tail=install)
    assert found.failure_class == "user_error" and any("InstallModuleError" in e for e in found.evidence)
    assert classify("Failed", "", log_tail=["InstallModuleError=1"]).failure_class == "unknown"


def test_evidence_keeps_the_last_three_hits_in_log_order():
    tail = [f"[rank{i}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={i})" for i in range(5)]
    found = classify("Failed", "", log_tail=tail)
    assert [e.split("]")[0] for e in found.evidence] == ["algo-1: [rank2", "algo-1: [rank3", "algo-1: [rank4"]


def test_oom_remedy_ranks_the_roomiest_change_first():
    plan = _plan_json()
    found = classify("Failed", "AlgorithmError: ExitCode 1", log_tail=["torch.OutOfMemoryError: CUDA out of memory"],
                     plan=plan)
    import re as _re

    best = float(_re.search(r"\(modelled ([0-9.]+) GB\)", found.remedy).group(1))
    now = float(_re.search(r"layout at ([0-9.]+) of", found.remedy).group(1))
    assert best <= 0.9 * now
    from launcher.rules.memory import estimate

    arch, layout, base = failures._layout_of(plan)
    alternatives = [estimate(arch, layout(**{**base, "batch_size": base["batch_size"] // 2})).per_gpu_gb] \
        if base["batch_size"] > 1 else []
    assert all(best <= gb + 0.05 for gb in alternatives)


class _Logs:
    def __init__(self, streams, events):
        self.streams, self.events, self.asked = streams, events, []

    def describe_log_streams(self, **kw):
        return {"logStreams": self.streams}

    def get_log_events(self, **kw):
        self.asked.append(kw["logStreamName"])
        return {"events": self.events[kw["logStreamName"]]}


def test_log_tail_reads_the_newest_algo_1_stream_of_several():
    streams = [{"logStreamName": "job/algo-1-1700000900", "lastEventTimestamp": 5},
               {"logStreamName": "job/algo-1-1700000100", "lastEventTimestamp": 9},
               {"logStreamName": "job/algo-10-1700000100", "lastEventTimestamp": 99},
               {"logStreamName": "job/algo-2-1700000100", "lastEventTimestamp": 50}]
    events = {s["logStreamName"]: [{"message": s["logStreamName"]}] for s in streams}
    logs = _Logs(streams, events)
    clients = type("C", (), {"logs": logs})()
    assert failures.log_tail(clients, "job") == ["job/algo-1-1700000100"]
    tie = [{"logStreamName": "job/algo-1-a", "lastEventTimestamp": 5},
           {"logStreamName": "job/algo-1-b", "lastEventTimestamp": 5}]
    logs = _Logs(tie, {s["logStreamName"]: [{"message": s["logStreamName"]}] for s in tie})
    assert failures.log_tail(type("C", (), {"logs": logs})(), "job") == ["job/algo-1-b"]


def test_a_reasons_line_breaks_show_as_a_visible_mark_never_as_escapes():
    found = classify("Failed", 'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage ""\r\n')
    assert found.evidence[0] == 'FailureReason: AlgorithmError: ExecuteUserScriptError: ⏎ ExitCode 1 ⏎ ErrorMessage ""'
    assert "\\x0a" not in found.remedy + "".join(found.evidence)


def test_reason_lines_are_split_safely_whether_raw_or_already_cleaned():
    from launcher.core.sanitize import clean, clean_lines, one_line

    raw = "boom \x1b]0;owned\x07\r\nfake line\n\u202eevil\n"
    for text in (raw, clean(raw)):
        lines = clean_lines(text)
        assert lines == ["boom \\x1b]0;owned\\x07", "fake line", "\\u202eevil"]
        assert one_line(text) == "boom \\x1b]0;owned\\x07 ⏎ fake line ⏎ \\u202eevil"
    assert one_line("x" * 50 + "\n" + "y" * 50, limit=20) == "x" * 19 + "…"
    assert clean_lines("\n\nonly\n\n") == ["only"] and clean_lines("") == []


def _plan_with(*overrides: str) -> dict:
    import launcher
    from launcher.plan.bundle import deterministic_plan

    plan = launcher.build_plan(launcher.load_spec("jobs/llama7b.yaml", ["role=Good", *overrides]))
    return json.loads(json.dumps(deterministic_plan(plan)))


def test_oom_remedy_turns_checkpointing_on_first_when_it_is_off():
    plan = _plan_with("smp.tensor_parallel_degree=4", "smp.hybrid_shard_degree=2", "smp.activation_checkpointing=false")
    assert failures.oom_remedy(plan) == (
        "a GPU ran out of memory (the memory model put this layout at 34.8 of 40 GB per GPU): set "
        "smp.activation_checkpointing: true in the spec (modelled 17.2 GB); also possible: "
        "smp.tensor_parallel_degree: 8 (and smp.hybrid_shard_degree: 1), training.batch_size: 2; check with "
        "`smp-launch plan SPEC`.")  # ranked by modelled memory, the most room first


def test_oom_remedy_reads_checkpointing_from_the_recorded_activations_else_assumes_it():
    plan = _plan_with("smp.activation_checkpointing=false")
    assert "at 97.9 of 40 GB" in failures.oom_remedy(plan)
    del plan["memory"]["breakdown"]["activations"]
    assert "at 27.5 of 40 GB" in failures.oom_remedy(plan)  # without the figure: checkpointed, the default


def test_oom_remedy_layout_defaults_and_limits():
    plan = _plan_with()
    del plan["distribution"]["smdistributed"]["modelparallel"]["parameters"]["sm_activation_offloading"]
    assert "at 27.5 of 40 GB" in failures.oom_remedy(plan)  # offloading off unless the plan says so
    offloaded = failures.oom_remedy(_plan_with("smp.activation_offloading=true"))  # PyTorch's: one layer kept
    assert "at 23.2 of 40 GB" in offloaded and "activation_offloading" not in offloaded
    whole_node = failures.oom_remedy(_plan_with("smp.tensor_parallel_degree=4", "smp.hybrid_shard_degree=2",
                                                "training.batch_size=16"))
    assert "set smp.tensor_parallel_degree: 8 (and smp.hybrid_shard_degree: 1)" in whole_node  # TP up to the GPUs
    assert failures.oom_remedy(_plan_with("training.batch_size=1")) is None  # nothing the model gives room to
    # 24 GPUs sharded by 8: TP 2 would need shards of 16 GPUs (24 is not a multiple), so TP 4 over shards of 6
    three = failures.oom_remedy(_plan_with("cluster.instance_count=3", "smp.hybrid_shard_degree=8",
                                           "training.batch_size=8"))
    assert "set smp.tensor_parallel_degree: 4 (and smp.hybrid_shard_degree: 6) in the spec" in three
    assert "tensor_parallel_degree: 2" not in three


def test_failure_to_dict_names_every_key():
    found = classify("Failed", "AlgorithmError: ExecuteUserScriptError:\nExitCode 139")
    assert found.to_dict() == {"failure_class": "unknown", "failure_reason": found.reason,
                               "remedy": found.remedy, "evidence": list(found.evidence), "exit_code": 139}


class _DiagnoseClients:
    def __init__(self, events):
        self.logs = _Logs([{"logStreamName": "j/algo-1-1", "lastEventTimestamp": 1}],
                          {"j/algo-1-1": [{"message": m} for m in events]})
        self.s3 = _S3(_tarball({"plan.json": json.dumps(_plan_json()).encode()}))


def test_diagnose_reads_the_log_and_the_plan_only_for_an_oom():
    desc = {**DESC, "TrainingJobName": "j", "TrainingJobStatus": "Failed",
            "FailureReason": "AlgorithmError: ExitCode 1"}
    oom = failures.diagnose(_DiagnoseClients(["torch.OutOfMemoryError: CUDA out of memory"]), desc)
    assert oom.failure_class == "out_of_memory" and "smp.tensor_parallel_degree: 2" in oom.remedy
    user = failures.diagnose(_DiagnoseClients(["Traceback (most recent call last):", "KeyError: 'x'"]), desc)
    assert user.failure_class == "user_error" and "memory model" not in user.remedy
    assert failures.diagnose(_DiagnoseClients([]), {**desc, "TrainingJobStatus": "Completed"}) is None


def test_log_tail_asks_for_the_last_hundred_lines_by_default():
    asked = []

    class Logs(_Logs):
        def get_log_events(self, **kw):
            asked.append(kw["limit"])
            return super().get_log_events(**kw)

    logs = Logs([{"logStreamName": "j/algo-1-1", "lastEventTimestamp": 1}], {"j/algo-1-1": []})
    failures.log_tail(type("C", (), {"logs": logs})(), "j")
    failures.log_tail(type("C", (), {"logs": logs})(), "j", 20_000)
    assert asked == [100, 10_000]


def test_hybrid_sharding_is_proposed_when_it_can_grow():
    assert failures.oom_remedy(_plan_with("smp.hybrid_shard_degree=2")) == (
        "a GPU ran out of memory (the memory model put this layout at 65.1 of 40 GB per GPU): set "
        "smp.hybrid_shard_degree: 8 in the spec (modelled 27.5 GB); also possible: smp.tensor_parallel_degree: 2; "
        "check with `smp-launch plan SPEC`.")
    assert "also possible: smp.hybrid_shard_degree: 8" in failures.oom_remedy(_plan_with("smp.hybrid_shard_degree=4"))
    assert "smp.hybrid_shard_degree: 8" not in failures.oom_remedy(_plan_with())  # already 8: nothing to grow


def test_the_loading_horizon_defaults_to_two():
    plan = _plan_with("smp.activation_offloading=true", "smp.sm_activation_offloading=true")
    del plan["distribution"]["smdistributed"]["modelparallel"]["parameters"]["activation_loading_horizon"]
    assert "at 23.4 of 40 GB" in failures.oom_remedy(plan)


def test_a_plan_json_without_the_offloading_decision_reads_smps_flag():
    """plan.json files written before `decisions.offloading` existed: SMP's flag on means SMP's offloading."""
    plan = _plan_with("smp.activation_offloading=true", "smp.sm_activation_offloading=true")
    del plan["decisions"]["offloading"]
    assert "at 23.4 of 40 GB" in failures.oom_remedy(plan)
    plain = _plan_with("smp.activation_offloading=true")
    del plain["decisions"]["offloading"]  # SMP's flag off: read as no offloading, as such a plan meant
    assert "at 27.5 of 40 GB" in failures.oom_remedy(plain)


def test_the_memory_model_remedy_is_for_a_gpu_oom_only():
    plan = _plan_json()
    nccl = classify("Failed", "AlgorithmError: ExitCode 1", plan=plan,
                    log_tail=["[E ProcessGroupNCCL.cpp:1] Watchdog caught collective operation timeout"])
    assert nccl.remedy.startswith(failures.REMEDIES[failures.FailureClass.NCCL_TIMEOUT])
    host = classify("Failed", "AlgorithmError: ExitCode 1", plan=plan, log_tail=["OSError: [Errno 12] Cannot "
                                                                                 "allocate memory"])
    assert host.remedy.startswith(failures.REMEDIES[failures.FailureClass.HOST_OUT_OF_MEMORY])


def test_a_spot_stop_shows_sagemakers_reason_when_it_gave_one():
    steps = [("Training", "x"), ("Interrupted", "The job stopped because the managed spot training instances were "
                                               "interrupted.")]
    given = classify("Stopped", "spot capacity gone", steps, secondary_status="MaxWaitTimeExceeded")
    assert given.reason == "spot capacity gone"
    assert classify("Stopped", None, steps, secondary_status="MaxWaitTimeExceeded").reason.startswith(
        "managed spot training ran out of wait time")


def test_a_log_line_is_searched_up_to_its_limit():
    keyword = "CUDA out of memory"
    inside = "x" * (failures.LINE_LIMIT - len(keyword)) + keyword
    beyond = "x" + inside
    assert classify("Failed", "", log_tail=[inside]).failure_class == "out_of_memory"
    assert classify("Failed", "", log_tail=[beyond]).failure_class == "unknown"
    assert failures.LINE_LIMIT == failures.LOG_LINE_LIMIT == 4096


def test_failures_are_frozen():
    import dataclasses

    found = classify("Failed", "CapacityError")
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.remedy = "x"


def test_log_tail_reads_backwards_and_cuts_long_lines():
    asked = []

    class Logs(_Logs):
        def get_log_events(self, **kw):
            asked.append(kw)
            return super().get_log_events(**kw)

    logs = Logs([{"logStreamName": "j/algo-1-1", "lastEventTimestamp": 1}], {"j/algo-1-1": [{"message": "y" * 5000}]})
    (line,) = failures.log_tail(type("C", (), {"logs": logs})(), "j")
    assert len(line) == failures.LOG_LINE_LIMIT and asked[0]["startFromHead"] is False


def test_user_error_quotes_the_last_three_lines_of_the_last_traceback_cut_to_300():
    tail = ["Traceback (most recent call last):", '  File "a.py", line 1', '  File "b.py", line 2',
            '  File "c.py", line 3', "    raise ValueError(x)", "ValueError: " + "v" * 400]
    found = classify("Failed", "AlgorithmError: ExitCode 1", log_tail=tail)
    assert 'File "c.py", line 3; raise ValueError(x); ValueError: vvv' in found.remedy
    assert 'b.py' not in found.remedy and "…)" in found.remedy
    quoted = found.remedy.split("exit code 1 (", 1)[1].rsplit("): read the traceback", 1)[0]
    assert len(quoted) == 300


def test_evidence_keeps_the_last_two_user_and_capacity_lines():
    tail = [f"sagemaker-containers ERROR InstallModuleError: try {i}" for i in range(3)]
    found = classify("Failed", "", log_tail=tail)
    assert [e[-5:] for e in found.evidence] == ["try 1", "try 2"]
    steps = [("Starting", f"Insufficient capacity error from EC2 while launching instances, retrying! ({i})")
             for i in range(3)]
    found = classify("Failed", "", steps)
    assert found.failure_class == "capacity" and [e[-3:] for e in found.evidence] == ["(1)", "(2)"]


def test_missing_parallel_degrees_default_to_one():
    plan = _plan_with()
    params = plan["distribution"]["smdistributed"]["modelparallel"]["parameters"]
    del params["tensor_parallel_degree"], params["expert_parallel_degree"], params["context_parallel_degree"]
    assert "at 27.5 of 40 GB" in failures.oom_remedy(plan)


def test_a_host_memory_kill_is_not_told_the_gpu_remedy():
    found = classify("Failed", "AlgorithmError: ExecuteUserScriptError:\nExitCode 137", plan=_plan_json())
    assert found.failure_class == "host_out_of_memory"
    assert "smp.delayed_param_init: true" in found.remedy and "instance type with more memory" in found.remedy
    assert "memory model" not in found.remedy and "training.batch_size" not in found.remedy


def test_the_bounds_are_exact():
    long_reason = "CapacityError " + "r" * 20_000
    found = classify("Failed", long_reason)
    assert len(found.reason) == failures.REASON_LIMIT == 1000
    assert len(found.evidence[0]) == failures.EVIDENCE_LIMIT == 300
    quoted = found.remedy.split("(decided by ", 1)[1][:-1]
    assert len(quoted) == failures.QUOTE_LIMIT == 200
    keyword = "CapacityError"
    assert classify("Failed", "x" * (failures.SCAN_LIMIT - len(keyword)) + keyword).failure_class == "capacity"
    assert classify("Failed", "x" * (failures.SCAN_LIMIT - len(keyword) + 1) + keyword).failure_class == "unknown"
    oom = ["torch.OutOfMemoryError: CUDA out of memory"]
    assert classify("Failed", "", log_tail=oom + ["."] * 199).failure_class == "out_of_memory"
    assert classify("Failed", "", log_tail=oom + ["."] * 200).failure_class == "unknown"  # 200 lines searched


def test_a_short_traceback_is_quoted_from_its_first_frame():
    found = classify("Failed", "AlgorithmError:", log_tail=["Traceback (most recent call last):",
                                                              '  File "x.py", line 1', "KeyError: 'k'"])
    assert '(File "x.py", line 1; KeyError: \'k\')' in found.remedy


def test_stopped_and_interrupted_reasons_and_defaults():
    trained = [("Training", "Training image download completed. Training in progress.")]
    spot = classify("Stopped", None, trained, secondary_status="MaxWaitTimeExceeded")
    assert spot.failure_class == "spot_interruption"  # it trained, then ran out of wait: an interruption
    assert classify("Stopped", None, [("Starting", "x")], secondary_status="MaxWaitTimeExceeded").failure_class == \
        "capacity"
    assert classify("Stopped", "why", [], secondary_status="MaxWaitTimeExceeded").reason == "why"
    assert classify("Stopped", "why", [], secondary_status="MaxRuntimeExceeded").reason == "why"
    assert classify("Stopped", None, [], secondary_status="MaxRuntimeExceeded").reason.startswith(
        "the job reached its MaxRuntimeInSeconds")
    blank = classify("Stopped", None, [("Interrupted", "")], secondary_status="MaxWaitTimeExceeded")
    assert blank.evidence[0] == "Interrupted: managed spot instances interrupted"
    failed = classify("Failed", "", [("Interrupted", "The job stopped because the managed spot training instances "
                                                     "were interrupted.")])
    assert failed.failure_class == "spot_interruption"


def test_diagnose_reads_no_log_for_a_stopped_job_and_passes_its_limit():
    asked = []

    class Clients:
        class logs:  # noqa: N801 - a stand-in for the client attribute
            @staticmethod
            def describe_log_streams(**kw):
                asked.append("streams")
                return {"logStreams": [{"logStreamName": "j/algo-1-1", "lastEventTimestamp": 1}]}

            @staticmethod
            def get_log_events(**kw):
                asked.append(kw["limit"])
                return {"events": []}

    stopped = {"TrainingJobName": "j", "TrainingJobStatus": "Stopped", "SecondaryStatus": "Stopped"}
    assert failures.diagnose(Clients(), stopped) is None and asked == []
    failures.diagnose(Clients(), {**stopped, "TrainingJobStatus": "Failed", "FailureReason": "x"})
    assert asked == ["streams", 100]
    asked.clear()
    assert failures.log_tail(Clients(), "j", 0) == [] and asked == ["streams", 1]


def test_log_tail_without_streams_is_empty():
    logs = _Logs([], {})
    assert failures.log_tail(type("C", (), {"logs": logs})(), "j") == []


# -- issue 33: the second corpus, the kinds of texts it brought, and the remedies each kind gets ----------------

def test_the_second_corpus_is_split_by_its_urls_alone_and_every_text_is_cited():
    import sys

    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    from failure_split import half

    assert len(CORPUS_2) >= 80 and len({c["id"] for c in CORPUS_2}) == len(CORPUS_2)
    first_pages = {c["source"].split("#")[0] for c in CORPUS}
    for case in CORPUS_2:
        assert case["half"] == half(case["source"]), case["id"]
        assert case["source"].startswith("https://") and case["source"].split("#")[0] not in first_pages, case["id"]
    halves = {c["half"] for c in CORPUS_2}
    assert halves == {"rules", "held_out"}
    assert half("https://example.com/a#x") == half("https://example.com/a")  # the fragment is not the page


@pytest.mark.parametrize("case", CORPUS_2 + ROUNDS, ids=lambda c: c["id"])
def test_the_second_corpus_and_the_held_out_rounds_are_classed_as_their_pages_show(case):
    assert _corpus_class(case) == case["expected"]


GPU_REMEDY_MARKS = ("a GPU ran out of memory", "memory model", "smp.tensor_parallel_degree", "training.batch_size",
                    "smp.activation_checkpointing")


@pytest.mark.parametrize("case", [c for c in CORPUS + CORPUS_2 + ROUNDS
                                  if c["expected"] in ("host_out_of_memory", "disk_full", "interconnect")],
                         ids=lambda c: c["id"])
def test_no_host_memory_disk_or_interconnect_failure_gets_a_gpu_memory_remedy(case):
    found = classify(case["status"], case["failure_reason"], [tuple(t) for t in case["transitions"]],
                     case["log_tail"], plan=_plan_json())
    assert found.failure_class == case["expected"]
    assert not any(mark in found.remedy for mark in GPU_REMEDY_MARKS), found.remedy


@pytest.mark.parametrize("line,kind", [
    ("NCCL WARN NET/OFI Unable to register memory (type = 1) for device 0. RC: 12, Error: Cannot allocate memory",
     failure_rules.EFA_MEMORY_REMEDY),
    ("Libfabric error: (-12) Cannot allocate memory", failure_rules.EFA_MEMORY_REMEDY),
    ("nccl_net_ofi_create_plugin:1067 NCCL WARN NET/OFI aws-ofi-nccl initialization failed",
     failure_rules.EFA_REMEDY),
    ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1333, remote process exited or there "
     "was a network error, NCCL version 2.18.6", failure_rules.NCCL_REMEDY),
    ("ORTE has lost communication with a remote daemon.", failure_rules.MPI_REMEDY),
])
def test_each_kind_of_interconnect_failure_gets_its_own_remedy(line, kind):
    found = classify("Failed", "AlgorithmError: ExitCode 1", log_tail=[line])
    assert found.failure_class == "interconnect" and found.remedy.startswith(kind)


def test_efas_cannot_allocate_memory_is_memory_registration_not_ram_but_the_kernels_is_ram():
    efa = classify("Failed", "", log_tail=["Libfabric error: (-12) Cannot allocate memory"])
    ram = classify("Failed", "", log_tail=["OSError: [Errno 12] Cannot allocate memory"])
    assert efa.failure_class == "interconnect" and "not the instance's RAM" in efa.remedy
    assert ram.failure_class == "host_out_of_memory"


def test_a_cause_outranks_the_nccl_errors_it_brings_on():
    tail = ["NCCL WARN Net : Connection closed by remote peer", "OSError: [Errno 12] Cannot allocate memory"]
    assert classify("Failed", "", log_tail=tail).failure_class == "host_out_of_memory"
    tail = ["torch.distributed.DistBackendError: NCCL error: remote process exited or there was a network error",
            "ng:3 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'"]
    assert classify("Failed", "", log_tail=tail).failure_class == "out_of_memory"


@pytest.mark.parametrize("reason", [
    "ClientError: SageMaker was unable to assume the role 'arn:aws:iam::1:role/R'",
    "ClientError: An error occurred (ValidationException) when calling the CreateTrainingJob operation: Could not "
    "assume role arn:aws:iam::1:role/R. Please ensure that the role exists and allows principal "
    "'sagemaker.amazonaws.com' to assume the role.",
    "ClientError: TrainingHostAgent Initialization failed:InvalidInputException: SageMaker is unable to perform: "
    "sts:AssumeRole on the role. Check if you have a trust relationship for 'sagemaker.amazonaws.com' to assume the "
    "role.",
])
def test_a_role_sagemaker_cannot_assume_is_one_cause_in_the_apis_and_the_host_agents_words(reason):
    found = classify("Failed", reason)
    assert found.failure_class == "permissions" and found.remedy.startswith(failures.ROLE_REMEDY)


@pytest.mark.parametrize("reason,tail", [
    ("ClientError: API error (404): manifest for 1.dkr.ecr.us-west-2.amazonaws.com/x:1 not found: manifest unknown: "
     "Requested image not found", []),                                                         # the registry
    ("ClientError: An error occurred (ValidationException) when calling the CreateTrainingJob operation: Cannot "
     "find repository: x in registry ID: 1", []),                                               # the API
    ("", ["docker: Error response from daemon: pull access denied for x, repository does not exist"]),  # runtime
    ("", ['container_linux.go:247: starting container process caused "exec: \\"train\\": executable file not '
          'found in $PATH"']),                                                                  # the runtime
    ("", ["[FATAL tini (7)] exec train failed: No such file or directory"]),                    # the init process
    ("", ["exec /usr/local/bin/python3: exec format error"]),                                   # another CPU's
])
def test_an_image_that_cannot_be_pulled_or_started_is_one_cause_in_every_voice(reason, tail):
    assert classify("Failed", reason, log_tail=tail).failure_class == "image"


def test_an_image_file_in_a_scripts_own_error_is_not_the_training_image():
    reason = ("AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"FileNotFoundError: image 7.jpg "
              "not found\"")
    assert classify("Failed", reason).failure_class == "user_error"


def test_sagemakers_internal_error_quoted_inside_other_text_is_still_its_own():
    for reason in ("Failed. Reason: InternalServerError: We encountered an internal error. Please try again.",
                   "ValueError: Error for Training job j: Failed Reason: InternalServerError: We encountered an "
                   "internal error. Please try again."):
        found = classify("Failed", reason)
        assert found.failure_class == "internal_error" and 'SageMaker says: "Please try again."' in found.remedy


@pytest.mark.parametrize("line,spec_change", [
    ("RuntimeError: SMDDP does not support: ReduceOp", "smp.backend: nccl"),
    ("smdistributed.dataparallel.exceptions.SMDDPError: Error", "smp.backend: nccl"),
    ("AssertionError: Device compute capability 9.x required for FP8 execution.", "training.precision: bf16"),
    ("ImportError: cannot import name 'checkpoint' from 'torch.sagemaker.distributed.fsdp'",
     "framework.pytorch_version"),
    ("AttributeError: module 'smdistributed.dataparallel.torch' has no attribute 'x'", "framework.pytorch_version"),
])
def test_smps_own_failures_name_the_spec_change(line, spec_change):
    found = classify("Failed", "AlgorithmError: ExitCode 1", log_tail=[line])
    assert found.failure_class == "smp" and spec_change in found.remedy


def test_a_wrapper_with_nothing_after_it_takes_its_class_from_the_log():
    wrapper = "AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"\""
    assert classify("Failed", wrapper, log_tail=["torch.OutOfMemoryError: CUDA out of memory"]).failure_class == \
        "out_of_memory"
    assert classify("Failed", wrapper, log_tail=["Traceback (most recent call last):", "KeyError: 'x'"]) \
        .failure_class == "user_error"
    alone = classify("Failed", wrapper, log_tail=["step 10 loss 2.1"])
    assert alone.failure_class == "unknown" and "smp-launch logs JOB" in alone.remedy
    assert "exit code 1" in alone.remedy and "another host" in alone.remedy


def test_a_launchers_own_traceback_is_the_wrapper_not_the_scripts_error():
    tail = ["Traceback (most recent call last):", '  File "/opt/conda/bin/torchrun", line 8, in <module>',
            "    raise ChildFailedError(", "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
            "train.py FAILED"]
    assert classify("Failed", "AlgorithmError: ExitCode 1", log_tail=tail).failure_class == "unknown"
    worker = ["Traceback (most recent call last):", '  File "/opt/ml/code/train.py", line 3', "ValueError: bad",
              *tail]
    found = classify("Failed", "AlgorithmError: ExitCode 1", log_tail=worker)
    assert found.failure_class == "user_error" and "ValueError: bad" in found.remedy  # the worker's, not the wrapper


def test_mpi_says_which_rank_ended_and_how_but_not_why():
    tail = ["mpirun noticed that process rank 3 with PID 9 on node algo-1 exited on signal 11 (Segmentation fault)."]
    found = classify("Failed", "", log_tail=tail)
    assert found.failure_class == "unknown" and "rank 3 ended on signal 11 (SIGSEGV" in found.remedy
    killed = ["mpirun noticed that process rank 1 with PID 9 on node algo-2 exited on signal 9 (Killed)."]
    assert classify("Failed", "", log_tail=killed).failure_class == "host_out_of_memory"


def _progress(step: int) -> str:
    from launcher.render import progress

    return "[1,mpirank:0,algo-1]<stdout>:" + progress.LINE_FORMAT.format(
        step=step, loss=2.0, lr=1e-4, tokens_per_s=1000.0, tflops_per_gpu=100.0, gpu_mem_gb=30.0)


def test_a_max_runtime_stop_names_the_step_reached_the_checkpoint_and_the_rerun():
    tail = [_progress(400), "checkpoint of step 400 saved to /opt/ml/checkpoints/step_400", _progress(450)]
    found = classify("Stopped", None, [("Training", "x")], tail, secondary_status="MaxRuntimeExceeded",
                     plan={**_plan_json(), "training": {"max_steps": 1000}})
    assert found.failure_class == "max_runtime"
    assert "at step 450 of 1000; its last checkpoint is of step 400" in found.remedy
    assert "`smp-launch rerun JOB --resume` carries on from it (600 steps left)" in found.remedy
    assert found.evidence[1].endswith("step=450 loss=2.0000 lr=1.000e-04 tokens_per_s=1000.0 tflops_per_gpu=100.00 "
                                      "gpu_mem_gb=30.00")
    bare = classify("Stopped", None, [], [], secondary_status="MaxRuntimeExceeded")
    assert "at step" not in bare.remedy and "carries on from its last checkpoint, if it saved one" in bare.remedy


def test_diagnose_reads_a_max_runtime_stops_log_and_its_specs_steps():
    clients = _DiagnoseClients([_progress(7), "checkpoint of step 5 saved to /x"])
    clients.s3 = _S3(_tarball({"plan.json": json.dumps(_plan_json()).encode(),
                               "spec.json": json.dumps({"training": {"max_steps": 1000}}).encode()}))
    desc = {**DESC, "TrainingJobName": "j", "TrainingJobStatus": "Stopped", "SecondaryStatus": "MaxRuntimeExceeded"}
    found = failures.diagnose(clients, desc)
    assert found.failure_class == "max_runtime" and "at step 7 of 1000" in found.remedy
