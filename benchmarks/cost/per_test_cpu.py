"""A pytest plugin: the machine's busy CPU-seconds and the wall seconds of each test.

Loaded by `python -m benchmarks.cost.suite_cost --per-test` into one pytest that runs the
tests one at a time (no pytest-xdist), it reads /proc/stat around each test's whole protocol
(setup, call, teardown), so every process the test starts is counted, and so is a module
fixture's sweep, in the first test that asks for it. It appends one JSON object a test to the
file named by PER_TEST_CPU_FILE: {"test": node id, "cpu": CPU-s, "wall": s}.
"""

from __future__ import annotations

import json
import os
import time

import pytest

#: The variable that names the file the plugin appends to.
OUTPUT_VARIABLE = "PER_TEST_CPU_FILE"


def busy_seconds(stat: str = "/proc/stat") -> float:
    """The CPU-seconds all cores have been busy since boot (user, nice, system, irq,
    softirq, steal), from /proc/stat's first line."""
    with open(stat, encoding="ascii") as file:
        fields = file.readline().split()
    if not fields or fields[0] != "cpu":
        raise ValueError(f"{stat} does not start with the cpu line")
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    path = os.environ.get(OUTPUT_VARIABLE)
    if not path:
        yield
        return
    before, started = busy_seconds(), time.monotonic()
    yield
    record = {"test": item.nodeid, "cpu": round(busy_seconds() - before, 3),
              "wall": round(time.monotonic() - started, 3)}
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps(record) + "\n")
