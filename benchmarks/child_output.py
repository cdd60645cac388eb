"""A child's output never slows it: a child that prints 100 MB, spawned and forked.

The child prints `--megabytes` MB to its stdout in lines of 100 bytes, over 10 timed
iterations, as a chatty model would, under the runner's supervisor (runner/run/process/supervision.py):
once spawned as a fresh interpreter, once forked from a fork server. It prints the child's
own median time per iteration, the parent's wall time and the size of the child's log
(capped: its head and its tail, with a count of what was dropped).

    python -m benchmarks.child_output [--megabytes 100]

What it guards against: a runner that read the child's unbuffered pipe a byte at a time made
the forked child take 74,441 ms per iteration against 636 ms spawned, and its log 101 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from api import ForkServer, Supervisor

ITERATIONS = 10
LINE = "x" * 99


def child(argv: list[str]) -> int:
    """In the child: print the output, time each iteration, write the times to argv[0]."""
    result, megabytes = Path(argv[0]), float(argv[1])
    lines = int(megabytes * 1e6 / 100 / ITERATIONS)
    times = []
    for _ in range(ITERATIONS):
        start = time.perf_counter()
        for _ in range(lines):
            print(LINE)
        sys.stdout.flush()
        times.append(time.perf_counter() - start)
    result.write_text(json.dumps(times))
    return 0


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--child":
        return child(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=float, default=100.0)
    args = parser.parse_args(argv)
    environment = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    supervisor = Supervisor(600, None, False, None, threading.Event())
    server = ForkServer([], environment)
    try:
        with tempfile.TemporaryDirectory(prefix="child-output-") as folder:
            for method in ("spawn", "forkserver"):
                work = Path(folder) / method
                work.mkdir()
                times_file = work / "times.json"
                child_argv = ["--child", str(times_file), str(args.megabytes)]

                def start(method=method, work=work, child_argv=child_argv):
                    if method == "forkserver":
                        return server.start("benchmarks.child_output", child_argv,
                                            environment, str(work))
                    return subprocess.Popen(
                        [sys.executable, "-m", "benchmarks.child_output", *child_argv],
                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, env=environment, cwd=str(ROOT),
                        start_new_session=True)

                began = time.monotonic()
                outcome = supervisor.run(work, work / "scratch", start)
                wall = time.monotonic() - began
                times = json.loads(times_file.read_text())
                log = work / "child.log"
                print(f"{method:10s}: {args.megabytes:g} MB printed; child's median "
                      f"{statistics.median(times) * 1e3:8.1f} ms per iteration of "
                      f"{args.megabytes / ITERATIONS:g} MB; wall {wall:6.1f} s; exit "
                      f"{outcome.returncode}; child.log {log.stat().st_size / 1e6:.1f} MB")
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
