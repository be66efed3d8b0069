"""The reliability report: the real CLI against a moto server through a fault-injecting proxy, and a
fuzzer on the spec loader and `--set`; writes docs/reliability.md.

    python benchmarks/reliability.py [--short] [--fuzz-examples 300] [--only NAME] [--no-write]

Each scenario resets the server, creates the world (bucket, roles), runs one command as a subprocess
with AWS_ENDPOINT_URL pointed at the proxy, and then asks the server what exists. The invariants:
no traceback; an exit code from the documented set; the jobs the CLI says it started are the jobs
that exist (or it says it cannot tell); no log line lost or printed twice; an unanswered endpoint
gives up within 60 s. A row that breaks one is marked FAIL with the reason; the report shows what
the code does, not what it should do.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

import hostile  # noqa: E402
from faultproxy import FaultProxy, Rule  # noqa: E402

EXIT_CODES = {0, 1, 2, 3, 4, 5, 130, 143}
EXE = shutil.which("smp-launch", path=str(Path(sys.executable).parent)) or "smp-launch"
REPORT = REPO / "docs" / "reliability.md"
MUTATION = REPO / "benchmarks" / "results" / "mutation.json"
RESULTS = REPO / "benchmarks" / "results" / "reliability.json"
GIVE_UP_S = 60.0      # an endpoint that never answers fails with one line within 60 s
KILL_AFTER_S = 100.0  # our own bound on a run that does not give up
QUICK_JOB = {"starting": 0.3, "downloading": 0.2, "training": 1.5, "uploading": 0.2, "line_interval": 0.1,
             "decoy": False}
STARTED = re.compile(r"^started (\S+)", re.M)
# After a Ctrl-C (or SIGTERM), submit names a job it found on stderr: "interrupted, but NAME was started in REGION".
STARTED_AFTER_INTERRUPT = re.compile(r"^(?:interrupted|terminated), but (\S+) was started", re.M)
# SecondaryStatus transitions that `logs` and `submit --wait` print on stderr: progress, not the error.
TRANSITION = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ")
UNSURE = re.compile(r"cannot tell|may have started|may not have started|not known|unknown whether", re.I)


@dataclass
class Scenario:
    name: str
    command: str           # submit | submit --wait | logs | status
    rules: list[Rule] = field(default_factory=list)
    interrupt: bool = False  # SIGINT once the proxy holds a call
    short: bool = False      # also in CI's short run (tests/test_reliability_short.py)
    note: str = ""
    signal: int = signal.SIGINT  # what `interrupt` sends (SIGTERM: exit 143, not 130)
    expect_exit: int | None = None  # the one right exit code, where the scenario has one
    foreign: int = 0  # jobs the fault made as another process would: they exist, and are not ours to report
    run: Callable[[World, Scenario], Row] | None = None  # a scenario of more than one command (hostile.py)


def scenarios() -> list[Scenario]:
    sm, logs = "sagemaker", "logs"
    create, describe, filt = "CreateTrainingJob", "DescribeTrainingJob", "FilterLogEvents"
    return [
        Scenario("submit, no fault", "submit"),
        Scenario("submit, CreateTrainingJob throttled twice", "submit", [Rule(sm, create, "throttle", 2)], short=True),
        Scenario("submit, CreateTrainingJob 500 once", "submit", [Rule(sm, create, "5xx", 1)]),
        Scenario("submit, connection reset before CreateTrainingJob arrives", "submit", [Rule(sm, create, "reset", 1)]),
        Scenario("submit, CreateTrainingJob done but its answer lost (reset)", "submit",
                 [Rule(sm, create, "reset_after", 1)], note="the retry meets the job the first call made"),
        Scenario("submit, IAM and STS throttled", "submit",
                 [Rule("iam", None, "throttle", 3), Rule("sts", None, "throttle", 1)]),
        Scenario("submit, IAM simulation 500 always", "submit", [Rule("iam", "SimulatePrincipalPolicy", "5xx", None)]),
        Scenario("submit, S3 throttled twice (503 SlowDown)", "submit", [Rule("s3", None, "throttle", 2)]),
        Scenario("submit, CreateTrainingJob never answers", "submit", [Rule(sm, create, "hang", None)]),
        Scenario("submit, Ctrl-C while CreateTrainingJob is held (job created)", "submit",
                 [Rule(sm, create, "hold_after", 1)], interrupt=True),
        Scenario("submit, Ctrl-C while CreateTrainingJob is held (not sent)", "submit",
                 [Rule(sm, create, "hang", 1)], interrupt=True),
        Scenario("submit, SIGTERM while CreateTrainingJob is held (job created)", "submit",
                 [Rule(sm, create, "hold_after", 1)], interrupt=True, signal=signal.SIGTERM, expect_exit=143),
        Scenario("submit, SIGTERM while CreateTrainingJob is held (not sent)", "submit",
                 [Rule(sm, create, "hang", 1)], interrupt=True, signal=signal.SIGTERM, expect_exit=143),
        Scenario("submit, another job took the name just before CreateTrainingJob", "submit",
                 [Rule(sm, create, "taken", 1)], expect_exit=0, foreign=1, short=True,
                 note="the proxy sends the call twice: the first stands for another process; a new name is tried"),
        Scenario("submit, CreateTrainingJob throttled, then the name is another job's", "submit",
                 [Rule(sm, create, "throttle", 1), Rule(sm, create, "taken", 1)], expect_exit=0, foreign=1),
        Scenario("submit --wait, FilterLogEvents throttled 6 times", "submit --wait",
                 [Rule(logs, filt, "throttle", 6, after=1)]),
        Scenario("submit --wait, DescribeTrainingJob 500 twice", "submit --wait",
                 [Rule(sm, describe, "5xx", 2)]),
        Scenario("submit --retry, a status poll meets 500s (every try of one call)", "submit --retry capacity "
                 "--interval 0.5", [Rule(sm, describe, "5xx", 3)], expect_exit=0,
                 note="the queue asks again, as logs does, instead of ending"),
        Scenario("logs, no fault", "logs"),
        Scenario("logs, FilterLogEvents throttled 5 times", "logs", [Rule(logs, filt, "throttle", 5)], short=True),
        Scenario("logs, FilterLogEvents 500 three times", "logs", [Rule(logs, filt, "5xx", 3)]),
        Scenario("logs, connection resets on FilterLogEvents", "logs", [Rule(logs, filt, "reset", 3)]),
        Scenario("logs, FilterLogEvents never answers", "logs", [Rule(logs, filt, "hang", None)]),
        Scenario("logs, Ctrl-C while FilterLogEvents is held", "logs", [Rule(logs, filt, "hang", 1)],
                 interrupt=True),
        Scenario("status, no fault", "status"),
        Scenario("status, DescribeTrainingJob throttled twice", "status", [Rule(sm, describe, "throttle", 2)],
                 short=True),
        Scenario("status, DescribeTrainingJob 500 always", "status", [Rule(sm, describe, "5xx", None)]),
        Scenario("status, connection reset always", "status", [Rule(sm, describe, "reset", None)]),
        Scenario("status, DescribeTrainingJob never answers", "status", [Rule(sm, describe, "hang", None)]),
        Scenario("status, DescribeTrainingJob trickles a byte every 10 s", "status",
                 [Rule(sm, describe, "trickle", None)], expect_exit=4),
        Scenario("status, DescribeTrainingJob answer not UTF-8", "status", [Rule(sm, describe, "garble", None)],
                 expect_exit=0),
        Scenario("logs, FilterLogEvents answer not UTF-8", "logs", [Rule(logs, filt, "garble", None)],
                 expect_exit=0),
        *hostile.scenarios(sys.modules[__name__]),
    ]


@dataclass
class Row:
    scenario: str
    faults: str
    exit_code: int | str
    jobs_created: int | str
    jobs_reported: int | str
    lines_lost: int | str
    lines_duplicated: int | str
    wall_s: float
    problems: list[str]


class World:
    """One patched moto server for every scenario, reset before each."""

    def __enter__(self) -> World:
        import logging

        import boto3

        import emulator

        self.emulator = emulator
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._server = emulator.server()
        self.url = self._server.__enter__()
        self.boto3 = boto3
        return self

    def __exit__(self, *exc) -> None:
        self.emulator.set_default(None)
        self._server.__exit__(*exc)

    def client(self, service: str):
        return self.boto3.client(service, endpoint_url=self.url, region_name="us-west-2",
                                 aws_access_key_id="testing", aws_secret_access_key="testing")

    def reset(self) -> None:
        from tests.aws_setup import create_world

        self.emulator.reset_server(self.url)
        self.emulator.set_default(None)
        session = self.boto3.Session(region_name="us-west-2", aws_access_key_id="testing",
                                     aws_secret_access_key="testing")
        os.environ["AWS_ENDPOINT_URL"] = self.url  # the world is made directly, not through the proxy
        try:
            create_world(session)
        finally:
            del os.environ["AWS_ENDPOINT_URL"]

    def jobs(self) -> list[str]:
        return [j["TrainingJobName"] for j in self.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]]


def _cli_env(url: str, state: str) -> dict[str, str]:
    import emulator

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SMP_LAUNCH_"))}
    env.update(emulator.server_env(url), XDG_STATE_HOME=state, AWS_EC2_METADATA_DISABLED="true", NO_COLOR="1",
               SAGEMAKER_SUPPRESS_V2_WARNING="1", AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    return env


def _default_sigint() -> None:
    """A command started from a background job inherits SIGINT ignored, and Python then never raises
    KeyboardInterrupt: give the CLI the default disposition a terminal's Ctrl-C meets."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_scenario(world: World, sc: Scenario) -> Row:
    import emulator
    from tests.emulation import body_of, lost_and_duplicated

    if sc.run is not None:
        return sc.run(world, sc)
    world.reset()
    job = None
    if sc.command in ("logs", "status"):
        emulator.set_clock(lambda: time.time() - 3600)
        try:
            job = emulator.add_job(emulator.EmulatedJob("rel-job", hosts=3, training=40, decoy=False),
                                   world.client("sagemaker"))
        finally:
            emulator.set_clock(None)
        args = [sc.command, "rel-job"]
    else:
        emulator.set_default(QUICK_JOB if "--wait" in sc.command or "--retry" in sc.command else None)
        args = ["submit", "jobs/llama7b.yaml", "--set", "role=Good", *sc.command.split()[1:]]
    if sc.command == "logs":
        args += ["--interval", "0.2"]
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="smp-rel-") as state, FaultProxy(world.url, sc.rules) as proxy:
        t0 = time.monotonic()
        proc = subprocess.Popen([EXE, *args], cwd=REPO, env=_cli_env(proxy.url, state), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True,
                                preexec_fn=_default_sigint)
        if sc.interrupt:
            if proxy.held.wait(timeout=KILL_AFTER_S):
                time.sleep(0.3)
                proc.send_signal(sc.signal)
            else:
                problems.append("the call to interrupt never came")
        try:
            out, err = proc.communicate(timeout=max(1.0, KILL_AFTER_S - (time.monotonic() - t0)))
            code: int | str = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            code = f"killed after {KILL_AFTER_S:.0f} s"
            problems.append(f"still waiting after {KILL_AFTER_S:.0f} s")
        wall = time.monotonic() - t0
        fired = proxy.faults()
        others = set(proxy.taken)  # the names the `taken` fault gave to "another process"
    emulator.set_default(None)
    text = out + err
    if "Traceback" in text:
        problems.append("traceback")
    if isinstance(code, int) and code not in EXIT_CODES:
        problems.append(f"exit code {code} is not a documented one")
    if sc.interrupt and sc.expect_exit is None and code != 130:
        problems.append("an interrupt did not exit 130")
    if sc.expect_exit is not None and code != sc.expect_exit:
        problems.append(f"exit {code}, not {sc.expect_exit}")
    if any(r.fault in ("hang", "trickle") for r in sc.rules) and not sc.interrupt and wall > GIVE_UP_S \
            and isinstance(code, int):
        problems.append(f"gave up after {wall:.0f} s (> {GIVE_UP_S:.0f} s)")
    created: int | str = "-"
    reported: int | str = "-"
    lost: int | str = "-"
    dup: int | str = "-"
    if sc.command.startswith("submit"):
        names = set(world.jobs())
        said = set(STARTED.findall(out)) | set(STARTED_AFTER_INTERRUPT.findall(err))
        created, reported = len(names), len(said)
        unsure = bool(UNSURE.search(text))
        if said - names:
            problems.append(f"said started {', '.join(sorted(said - names))}, which does not exist")
        if said & others:
            problems.append(f"said started {', '.join(sorted(said & others))}, another's job")
        if len(names - said) > sc.foreign and not unsure:
            problems.append(f"{', '.join(sorted(names - said))} exists but was not reported")
        if unsure:
            reported = f"{reported} (said it cannot tell)"
        if code == 0 and not said:
            problems.append("exit 0 without a started job")
        if sc.command == "submit --wait" and said and code == 0:
            started = emulator.scenario.get(next(iter(said)))
            if started is not None:
                lost, dup = lost_and_duplicated(started.expected_messages(), body_of(out))
    elif sc.command == "logs" and job is not None:
        lost, dup = lost_and_duplicated(job.expected_messages(), body_of(out))
        if code == 0 and (lost or dup):
            problems.append(f"exit 0 with {lost} lines lost and {dup} duplicated")
        if code not in (0, 130) and not err.strip():
            problems.append("failed without a word on stderr")
    elif sc.command == "status" and code == 0 and "Completed" not in out:
        problems.append("exit 0 without the job's status")
    error_lines = [line for line in err.strip().splitlines() if not TRANSITION.match(line)]
    if isinstance(code, int) and code not in (0, 130) and len(error_lines) > 3:
        problems.append(f"{len(error_lines)} lines on stderr besides status transitions, not one")
    faults = "; ".join(f"{n}x {k}" for k, n in sorted(fired.items())) or "none"
    return Row(sc.name, faults, code, created, reported, lost, dup, round(wall, 1), problems)


# -- the fuzzer ---------------------------------------------------------------------------------

def fuzz(examples: int, seed: int = 0, time_limit_s: float = 2.0, with_corpus: bool = True) -> dict:
    """Hypothesis-generated specs and --set lists through `validate`; an invalid one also through
    `submit`, with the AWS calls counted at a proxy in front of an unreachable upstream."""
    import spec_fuzz

    with FaultProxy("http://127.0.0.1:9") as proxy:  # nothing listens on port 9: no call can succeed
        return spec_fuzz.run(examples, seed, time_limit_s, proxy, with_corpus)


# -- the report ---------------------------------------------------------------------------------

# Cases held by tests rather than (or as well as) a scenario above: what breaks, and the test file that holds it.
CASES = [
    ("a name SageMaker already holds is another's job unless one of this submit's own tries may have made it "
     "(exit 4, never `started`); the emulator refuses a name in use as SageMaker does", "tests/test_name_ownership.py"),
    ("retry names stay unique at every length of the first name (41-43 characters collided)",
     "tests/test_name_ownership.py"),
    ("SIGTERM while CreateTrainingJob is in flight: says whether the job exists, records it, exit 143",
     "tests/test_name_ownership.py"),
    ("a --set path of 1,000 or 20,000 parts: one line, exit 2, in bounded memory", "tests/test_bounds.py"),
    ("a job's stored tarball: a gzip bomb, too many members, a deep plan.json, each one line (one bounded reader "
     "for rerun, diff, status and wait)", "tests/test_bounds.py"),
    ("a total deadline on every AWS call (an endpoint trickling a byte every 10 s), naming the endpoint; the S3 "
     "body read too", "tests/test_bounds.py"),
    ("the state file: a link to /dev/zero, a FIFO, a huge file, a relative XDG_STATE_HOME", "tests/test_bounds.py"),
    ("answers that are not UTF-8 (FilterLogEvents, DescribeTrainingJob): no traceback", "tests/test_bounds.py"),
    ("`render --out DIR` replaces a planted DIR/train.py link, never writes through it", "tests/test_bounds.py"),
    ("secrets by value: a value from a secret-looking variable or shaped like a credential is refused in "
     "hyperparameters, tags and plainly named environment entries; no error echoes a secret",
     "tests/test_secret_values.py"),
    ("an IAM simulation that times out is `cannot tell` and the job goes on", "tests/test_smaller_faults.py"),
    ("a job name SageMaker would refuse: exit 2, no AWS call; names with escapes printed safely",
     "tests/test_smaller_faults.py"),
    ("the sanitiser: LRM/RLM/ALM, U+2028/2029, tag characters, zero-width spaces; an escape in a log line "
     "cannot be forged from literal text", "tests/test_smaller_faults.py"),
    ("a queue's status poll that meets a 500 is asked again", "tests/test_smaller_faults.py"),
    ("pipeline step names never repeat; an SDK ValueError is one line; the SDK's rich traceback hook is undone",
     "tests/test_smaller_faults.py"),
    ("two threads through one Clients keep separate aws_calls", "tests/test_smaller_faults.py"),
    ("click usage errors are one line", "tests/test_smaller_faults.py"),
    ("`advise --write` and `schema --write` never replace a file unless --force and never write through a link "
     "(dangling or not)", "tests/test_user_files.py"),
    ("a source tarball already at its key is reused only when it holds the plan's bytes (same size, other bytes "
     "included); another's object is left alone and the job names the next free key; a pipeline's tarballs and "
     "ModelTrainer drivers folders alike; an object planted among a job's own drivers stops the submit",
     "tests/test_source_content.py"),
    ("`stop` of a job smp-launch did not start (or whose tags it cannot read), or of another's queued job: exit 2 "
     "naming whose it is, before asking; --foreign stops it", "tests/test_stop_ownership.py"),
    ("a hyperparameter named like the SDK's own (sagemaker_*, mp_parameters) is refused at its line, for both "
     "backends, and by the schema", "tests/test_reserved_hyperparameters.py"),
    ("team templates render in Jinja's sandbox (four ways out to a shell, through validate and plan), a template "
     "linking out of its folder is refused, a credential a template writes is refused unechoed",
     "tests/test_template_trust.py"),
    ("a credential given as a --sweep value is shown redacted in the refusal line, the table and the JSON; a "
     "secret-looking environment entry too", "tests/test_sweep_secrets.py"),
    ("two sweeps planned in the same millisecond: the second process takes new names before sending any; a "
     "process elsewhere meets new names; a plan's error speaks of that plan only", "tests/test_sweep_names.py"),
    ("a sweep cut short and run again starts only what it had not; --no-resume, a finished sweep, a run still "
     "going in another terminal and a record that is not one", "tests/test_sweep_resume.py"),
]

def mutation_line() -> str:
    if not MUTATION.exists():
        return "Mutation score: not measured yet (run `make mutation`)."
    m = json.loads(MUTATION.read_text())
    if not m.get("run"):
        return "Mutation score: no mutant ran in the last `make mutation`."
    line = (f"Mutation score (`make mutation`, seed {m['seed']}, {m['budget_s']:.0f} s budget, "
            f"{m.get('workers', 1)} workers, a round-robin sample of every product module's mutants): "
            f"**{m['killed']}/{m['run']} = {m['score']:.1%} killed**, {len(m['survivors'])} survivors "
            f"({m.get('uncovered', 0)} on lines no test runs) listed in `benchmarks/results/mutation.json`.")
    rechecked = m.get("killed_by_recheck", 0)
    equivalent = len(m.get("equivalent", []))
    if rechecked or equivalent:
        fresh_run = m["run"] + equivalent
        line += (f" Before tests were added for its survivors (`make mutation` then `benchmarks/mutation.py "
                 f"--survivors`) the same sample scored {m['killed'] - rechecked}/{fresh_run} = "
                 f"{(m['killed'] - rechecked) / fresh_run:.1%}; {equivalent} survivors were found equivalent and "
                 "left the sample. A fresh seed measures the suite without that help.")
    return line + " [Mutation testing](mutation.md) says how it is measured and gives every run."


def markdown(rows: list[Row], fuzzed: dict | None, short: bool) -> str:
    out = ["# Reliability report", "",
           "Generated by `make reliability` (`benchmarks/reliability.py`"
           + (", short run" if short else "") + "); do not edit by hand.",
           "The installed `smp-launch` runs as a subprocess against a moto server with the project's emulator "
           "patches, through a fault-injecting proxy on 127.0.0.1 (`benchmarks/faultproxy.py`). Jobs created "
           "are what the server holds afterwards; jobs reported are the `started NAME` lines the CLI printed. "
           "Lines lost and duplicated compare the printed log lines with the emulated job's own lines. "
           f"FAIL marks a broken invariant: a traceback, an undocumented exit code, a started job that was not "
           f"reported (or the reverse) without saying it cannot tell, a job another process made (the `taken` "
           f"fault sends CreateTrainingJob twice, the first standing for that process) reported as started, "
           f"a lost or repeated line after exit 0, no exit 130 after Ctrl-C (143 after SIGTERM), an exit code "
           f"other than the one a scenario must end with, or no answer within {GIVE_UP_S:.0f} s from an endpoint "
           f"that never answers or trickles one byte every 10 s (runs are killed after {KILL_AFTER_S:.0f} s). "
           "The scenarios whose exit shows two codes run two commands, or two processes at once "
           "(`benchmarks/hostile.py`): each checks what must hold after both (the job runs the plan's own tarball, "
           "no plan of a sweep starts twice, no job is reported by two processes, a credential is printed nowhere, "
           "another's job is stopped only with `--foreign`).", "",
           "| scenario | faults injected (fired) | exit | jobs created | jobs reported | lines lost | "
           "lines duplicated | wall s | verdict |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        verdict = "ok" if not r.problems else "FAIL: " + "; ".join(r.problems)
        out.append(f"| {r.scenario} | {r.faults} | {r.exit_code} | {r.jobs_created} | {r.jobs_reported} | "
                   f"{r.lines_lost} | {r.lines_duplicated} | {r.wall_s} | {verdict} |")
    failed = sum(bool(r.problems) for r in rows)
    out += ["", f"{len(rows) - failed} of {len(rows)} scenarios hold every invariant.", ""]
    if fuzzed is not None:
        out += ["## Fuzzing the spec loader and `--set`", "",
                f"{fuzzed['examples']} generated inputs (hypothesis, seed {fuzzed['seed']}) plus "
                f"{fuzzed['corpus']} hand-written hostile ones through `validate` (and, when invalid, `submit`), "
                f"each with a {fuzzed['time_limit_s']:.0f} s limit: "
                f"{fuzzed['failures']} runs broke an invariant; by kind: {len(fuzzed['tracebacks'])} kinds of "
                f"traceback, {len(fuzzed['slow'])} of running past the limit, {len(fuzzed['bad_exit'])} of an "
                f"undocumented exit code. {fuzzed['invalid']} inputs were invalid; they made "
                f"{fuzzed['aws_calls_on_invalid']} AWS calls (counted at the proxy).", ""]
        if fuzzed.get("leaks"):
            out[-2] += f" {len(fuzzed['leaks'])} echoed a secret or the content of a file that is not a spec."
        for kind in ("tracebacks", "slow", "bad_exit", "calls", "leaks"):
            for item in fuzzed.get(kind, [])[:25]:
                out.append(f"- {kind}: `{' '.join(item.replace('`', chr(39)).split())}`")
        out.append("")
    out += ["## Cases the tests hold", "",
            "Each fails on the code before its fix and passes after; the scenarios above that cover one run it "
            "end to end as well.", ""]
    out += [f"- {case} (`{where}`)" for case, where in CASES]
    out += ["", "## Mutation testing", "", mutation_line(), ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="only the scenarios CI runs")
    parser.add_argument("--only", action="append", default=[], help="scenarios whose name contains this")
    parser.add_argument("--fuzz-examples", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true", help="print the report instead of writing it")
    parser.add_argument("--render-only", action="store_true",
                        help="rewrite the report from the last run's results (e.g. after `make mutation`)")
    parser.add_argument("--fuzz-only", action="store_true", help="keep the last run's scenarios, fuzz again")
    args = parser.parse_args(argv)
    if args.render_only or args.fuzz_only:
        saved = json.loads(RESULTS.read_text())
        if args.fuzz_only:
            saved["fuzz"] = fuzz(args.fuzz_examples, args.seed)
            RESULTS.write_text(json.dumps(saved, indent=2) + "\n")
        REPORT.write_text(markdown([Row(**r) for r in saved["rows"]], saved["fuzz"], saved["short"]))
        print(f"wrote {REPORT.relative_to(REPO)} from {RESULTS.relative_to(REPO)}")
        return 0
    chosen = [s for s in scenarios() if (not args.short or s.short) and
              (not args.only or any(o in s.name for o in args.only))]
    rows = []
    with World() as world:
        for sc in chosen:
            row = run_scenario(world, sc)
            rows.append(row)
            print(f"{row.scenario}: exit {row.exit_code}, created {row.jobs_created}, reported {row.jobs_reported}, "
                  f"lost {row.lines_lost}, dup {row.lines_duplicated}, {row.wall_s} s "
                  f"{'ok' if not row.problems else 'FAIL: ' + '; '.join(row.problems)}", flush=True)
    fuzzed = fuzz(args.fuzz_examples, args.seed) if args.fuzz_examples else None
    if args.only and RESULTS.exists() and not args.no_write:  # re-ran a few: keep the others from the last run
        saved = json.loads(RESULTS.read_text())
        fresh = {r.scenario: r for r in rows}
        kept = {r["scenario"]: Row(**r) for r in saved["rows"]}
        kept.update(fresh)
        names = [s.name for s in scenarios()]
        rows = sorted(kept.values(), key=lambda r: names.index(r.scenario) if r.scenario in names else len(names))
        fuzzed = fuzzed or saved["fuzz"]
    text = markdown(rows, fuzzed, args.short)
    if args.no_write:
        print(text)
    else:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps({"rows": [asdict(r) for r in rows], "fuzz": fuzzed, "short": args.short},
                                      indent=2) + "\n")
        REPORT.write_text(text)
        print(f"wrote {REPORT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
