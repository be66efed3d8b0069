"""The demo account: an emulated AWS with a bucket, a job role and a few live training jobs, for trying every
`smp-launch` command (submit, logs, status, wait, list, metrics, stop, sweeps, pipeline) without an AWS account.

    python -m emulator [--port 5055] [--hosts 8] [--throttle 0.2] [--training 25]

then, in another shell from the repository root, export the variables it prints and run the commands it
suggests (they name the `smp-launch` of this interpreter's environment, e.g. `.venv/bin/smp-launch`, when none
is on PATH). A job submitted to it starts, downloads, trains (a progress line a second on every host) and
completes; emulator/account.py says what the account holds.
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import socket
import sys
import time
from pathlib import Path

import boto3

import emulator
from emulator import account, failures

PORT = 5055  # fixed, so the exports README.md shows are the ones printed


def cli_command(cwd: Path | None = None) -> str:
    """How to run the CLI from this shell: `smp-launch` if it is on PATH, else the script beside this Python."""
    if shutil.which("smp-launch"):
        return "smp-launch"
    script = Path(sys.executable).parent / "smp-launch"
    if script.exists():
        try:
            return os.path.relpath(script, cwd or Path.cwd())
        except ValueError:  # another drive (Windows)
            return str(script)
    return f"{shlex.quote(sys.executable)} -m launcher"


def port_taken(port: int) -> bool:
    """True when something already listens on 127.0.0.1:`port` (another emulator, say)."""
    if port == 0:
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def export_lines(env: dict[str, str]) -> list[str]:
    """The exports as two shell lines: where AWS is (and credentials it takes), then the bucket and the role."""
    aws = {k: v for k, v in env.items() if not k.startswith("SMP_LAUNCH_")}
    ours = {k: v for k, v in env.items() if k.startswith("SMP_LAUNCH_")}
    return ["export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in part.items()) for part in (aws, ours)]


def demo_jobs(sm, hosts: int) -> list[str]:
    """A few jobs already running or ended when the demo starts: one on many hosts, a long one, three failures."""
    late = {h: 6.0 for h in range(3, hosts + 1, 3)}
    jobs = [emulator.EmulatedJob("demo-llama7b", hosts=hosts, starting=10, downloading=5, training=90,
                                 late_hosts=late, backdate_every=7, metric_interval=5),
            emulator.EmulatedJob("demo-oom", hosts=2, starting=5, training=20, outcome="Failed"),
            emulator.EmulatedJob("demo-long", hosts=4, training=3600, line_interval=2.0),
            emulator.EmulatedJob("demo-capacity", hosts=2, starting=8, **failures.capacity_failure()),
            emulator.EmulatedJob("demo-nccl", hosts=2, starting=5, training=15, **failures.nccl_timeout())]
    for job in jobs:
        emulator.add_job(job, sm)
    return [job.name for job in jobs]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m emulator", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=PORT, help=f"port on 127.0.0.1 (default {PORT}; 0: a free one)")
    parser.add_argument("--hosts", type=int, default=8, help="hosts of the main demo job")
    parser.add_argument("--throttle", type=float, default=0.0, help="fraction of Logs reads to throttle")
    parser.add_argument("--training", type=float, default=account.LIFECYCLE["training"],
                        help="seconds a submitted job trains (default %(default)g)")
    args = parser.parse_args()
    if port_taken(args.port):
        sys.exit(f"python -m emulator: 127.0.0.1:{args.port} is in use (another emulator?); stop it, or pass "
                 "--port 0 for a free port (then export the AWS_ENDPOINT_URL printed)")
    with emulator.server(args.port) as url:
        env = account.exports(url)
        session = _Pointed(boto3.Session(region_name=account.REGION, aws_access_key_id="testing",
                                         aws_secret_access_key="testing"), url)
        account.seed(session)
        emulator.set_default({**account.LIFECYCLE, "training": args.training})
        names = demo_jobs(session.client("sagemaker"), args.hosts)
        from emulator import pricing

        priced = pricing.publish_demo_prices()  # `prices --refresh` finds a figure in every region served
        if args.throttle:
            emulator.serve(emulator.Throttle(args.throttle, seed=1))
        cli = cli_command()
        print(f"emulated AWS account {account.ACCOUNT} at {url} ({account.REGION}): bucket {account.BUCKET}, job "
              f"role {account.ROLE}, pipeline role {account.PIPELINE_ROLE}; demo jobs {', '.join(names)}.")
        print("In another shell, from the repository root:")
        print("\n".join(export_lines(env)))
        print(f"{cli} check-role jobs/llama7b.yaml; {cli} submit jobs/llama7b.yaml")
        print(f"{cli} logs latest; {cli} status latest; {cli} wait latest")
        print(f"{cli} list; {cli} logs demo-llama7b; {cli} metrics demo-llama7b --since 5m")
        print(f"{cli} prices --refresh  # {len(priced)} emulated Price List figures, one for each region served")
        print("Ctrl-C stops the emulator.", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


class _Pointed:
    """A boto3 Session whose clients all go to the emulator's endpoint."""

    def __init__(self, session, url: str):
        self.session, self.url = session, url

    def client(self, name: str, **kwargs):
        return self.session.client(name, endpoint_url=self.url, **kwargs)


if __name__ == "__main__":
    main()
