"""A demo: an emulated AWS with a few live training jobs, for trying `smp-launch logs/status/list/stop/metrics`.

    python -m emulator [--port 5055] [--hosts 8] [--throttle 0.2]

then, in another shell, export the variables it prints and run the commands it suggests (they name the
`smp-launch` of this interpreter's environment, e.g. `.venv/bin/smp-launch`, when none is on PATH).
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import time
from pathlib import Path

import boto3

import emulator
from emulator import failures


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


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m emulator", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--hosts", type=int, default=8, help="hosts of the main demo job")
    parser.add_argument("--throttle", type=float, default=0.0, help="fraction of Logs reads to throttle")
    args = parser.parse_args()
    with emulator.server(args.port) as url:
        env = emulator.server_env(url)
        sm = boto3.client("sagemaker", endpoint_url=url, region_name=env["AWS_REGION"],
                          aws_access_key_id="testing", aws_secret_access_key="testing")
        late = {h: 6.0 for h in range(3, args.hosts + 1, 3)}
        emulator.add_job(emulator.EmulatedJob("demo-llama7b", hosts=args.hosts, starting=10, downloading=5,
                                              training=90, late_hosts=late, backdate_every=7, metric_interval=5), sm)
        emulator.add_job(emulator.EmulatedJob("demo-oom", hosts=2, starting=5, training=20, outcome="Failed"), sm)
        emulator.add_job(emulator.EmulatedJob("demo-long", hosts=4, training=3600, line_interval=2.0), sm)
        emulator.add_job(emulator.EmulatedJob("demo-capacity", hosts=2, starting=8,
                                              **failures.capacity_failure()), sm)
        emulator.add_job(emulator.EmulatedJob("demo-nccl", hosts=2, starting=5, training=15,
                                              **failures.nccl_timeout()), sm)
        from emulator import pricing

        priced = pricing.publish_demo_prices()  # `prices --refresh` finds a figure in every region served
        if args.throttle:
            emulator.serve(emulator.Throttle(args.throttle, seed=1))
        print("emulated AWS at", url, "with jobs demo-llama7b, demo-oom, demo-long, demo-capacity, demo-nccl; "
              "in another shell:")
        print(" ".join(f"{k}={v}" for k, v in env.items()).join(("export ", "")))
        cli = cli_command()
        print(f"{cli} list; {cli} logs demo-llama7b; {cli} metrics demo-llama7b --since 5m")
        print(f"{cli} wait demo-llama7b demo-oom demo-capacity demo-nccl --interval 2")
        print(f"{cli} prices --refresh  # {len(priced)} emulated Price List figures, one for each region served")
        print("Ctrl-C stops the emulator.")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
