"""The turn on a shared GPU: an flock taken before the card is touched, lent while dynamo
compiles a frame or AOTAutograd a lazy backward, never once the timed runs start (real
torch.compile on the CPU; the lock is a real flock, seen through a second open of its file)."""

from __future__ import annotations

import dataclasses
import fcntl
import os
import threading
import time

import pytest
import torch
from torch._dynamo.callback import callback_handler

import backends
from core.config import ExperimentConfig
from core.contract import Role
from backends.stacks.dynamo import compiles_on_device
from child.device_gate import DeviceGate


@pytest.fixture
def gate(tmp_path):
    torch._dynamo.reset()
    gate = DeviceGate(str(tmp_path / "gpu-0.gate"))
    yield gate
    if gate._callbacks is not None or gate.held:
        gate.close()
    torch._dynamo.reset()


def is_free(path: str) -> bool:
    """Whether another process could take the gate now (a second open file description
    conflicts with the gate's own, as another child's would)."""
    other = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(other, fcntl.LOCK_UN)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(other)


@pytest.fixture
def seen_at_compile_start(gate):
    """Whether the gate was free as each compile started, by trigger (a callback after the
    gate's own)."""
    seen: list[tuple[str, bool]] = []

    def look(args) -> None:
        seen.append((args.callback_trigger.name, is_free(gate.path)))

    gate.acquire()
    gate.lend_during_compiles()
    callback_handler.register_start_callback(look)
    yield seen
    callback_handler.remove_start_callback(look)


def test_the_gate_is_lent_while_a_frame_and_its_lazy_backward_compile(gate, seen_at_compile_start):
    linear = torch.nn.Linear(4, 4)
    compiled = torch.compile(lambda x: linear(x).sum(), backend="aot_eager")
    assert not is_free(gate.path)
    compiled(torch.randn(2, 4)).backward()
    assert seen_at_compile_start == [("DYNAMO", True), ("LAZY_BACKWARD", True)]
    assert gate.held and not is_free(gate.path)
    record = gate.record()
    assert record["loans"] == 2 and record["lent_s"] > 0


def test_nothing_is_lent_once_the_timed_runs_start(gate, seen_at_compile_start):
    compiled = torch.compile(lambda x: (x * 2).sum(), backend="eager", dynamic=False)
    compiled(torch.randn(3))
    gate.stop_lending()
    compiled(torch.randn(5))  # another shape: a recompile inside the timed runs
    assert seen_at_compile_start == [("DYNAMO", True), ("DYNAMO", False)]
    assert gate.record()["loans"] == 1 and gate.held


def test_a_child_waits_for_the_gate_and_its_working_clock_leaves_the_wait_out(gate):
    other = os.open(gate.path, os.O_RDWR)
    fcntl.flock(other, fcntl.LOCK_EX)
    releaser = threading.Timer(0.4, lambda: fcntl.flock(other, fcntl.LOCK_UN))
    releaser.start()
    wall, working = time.perf_counter(), gate.working_clock()
    gate.acquire()
    wall, working = time.perf_counter() - wall, gate.working_clock() - working
    releaser.join()
    os.close(other)
    assert gate.held and wall >= 0.35
    assert gate.waited_s == pytest.approx(wall, abs=0.05)
    assert working < 0.05
    assert gate.record()["waits"] == 1


def test_closing_gives_the_gate_up_and_stops_lending(gate):
    gate.acquire()
    gate.lend_during_compiles()
    gate.close()
    assert is_free(gate.path)
    assert gate._compile_started not in callback_handler.start_callbacks
    assert gate._compile_ended not in callback_handler.end_callbacks


@pytest.mark.parametrize("options, on_device", [
    ({}, False),
    ({"triton.cudagraphs": True}, False),
    ({"max_autotune": True}, True),
    ({"max_autotune_gemm": True}, True),
    ({"freezing": True}, True),
])
def test_compiles_that_run_on_the_card_keep_the_gate(options, on_device):
    assert compiles_on_device(options) is on_device


@pytest.mark.e2e
def test_a_timing_child_lends_the_gate_while_dynamo_compiles_and_waits_to_run(tmp_path):
    """A real child (builtin mlp, aot_eager, on the CPU, with a gate as a shared GPU's
    children get one): the gate is taken while it builds, free while it compiles, and the
    wait to get it back counts neither in its cold start nor in its compile time."""
    import subprocess
    import sys

    from core.contract import RESULT_FILE, ChildResult, read_message

    gate_path, folder, environment = gated_child(tmp_path)
    child = subprocess.Popen([sys.executable, "-m", "child.worker", str(folder)],
                             env=environment)
    other = os.open(gate_path if os.path.exists(gate_path) else _touch(gate_path), os.O_RDWR)
    taken = lent = None
    deadline = time.monotonic() + 120
    while child.poll() is None and time.monotonic() < deadline and lent is None:
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            taken = taken or time.monotonic()  # the child holds it
        else:
            if taken is not None:
                lent = time.monotonic()  # free again while the child lives: lent
                # Held until the child has compiled and waits for it (the kernel lists the
                # blocked flock in /proc/locks), then a while longer.
                while child.poll() is None and not waits_for_flock(child.pid):
                    time.sleep(0.05)
                time.sleep(HOLD_S)
            fcntl.flock(other, fcntl.LOCK_UN)
        time.sleep(0.01)
    assert child.wait(timeout=300) == 0
    os.close(other)
    assert taken is not None and lent is not None, "the child never held, then lent, the gate"
    result = read_message(folder / RESULT_FILE, ChildResult)
    gate = result.summary["device_gate"]
    assert gate["loans"] >= 1 and gate["waits"] == 2
    assert gate["waited_s"] >= HOLD_S - 0.1
    phases = result.summary["phases"]
    # The wait is in the measuring phase's wall time, and not in the cold start.
    assert result.summary["cold_start_time"] + gate["waited_s"] <= phases["measure_s"] + 0.05
    assert result.summary["compile_time_s"] <= result.summary["cold_start_time"]


HOLD_S = 2.0


def gated_child(tmp_path) -> tuple[str, "os.PathLike[str]", dict[str, str]]:
    """A timing child's folder with its spec (builtin mlp, aot_eager, on the CPU, with a gate
    as a shared GPU's children get one), the gate's path and the child's environment."""
    from core.config import ModelConfig, RunSettings
    from core.contract import SPEC_FILE, ChildSpec, write_message
    from runner.run.process.child_env import PROJECT_ROOT

    gate_path = str(tmp_path / "gpu-0.gate")
    folder = tmp_path / "child"
    folder.mkdir()
    planned = ExperimentConfig("cpu", None, "aot_eager", None, "eval")
    spec = ChildSpec(ModelConfig("builtin", "mlp"),
                     dataclasses.replace(planned, stack=backends.stack_for(planned).name),
                     RunSettings(repeat=2, warmup=2, threads=1, reference_workload=False),
                     Role.TIME, str(folder), device_gate=gate_path)
    write_message(folder / SPEC_FILE, spec)
    environment = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT),
                   "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    return gate_path, folder, environment


@pytest.mark.e2e
@pytest.mark.waits
def test_a_childs_timeout_leaves_its_waits_for_the_gpu_out(tmp_path):
    """The gate is held (by another child, as it were) for longer than the child's timeout:
    the runner's supervisor does not kill the waiting child, which then runs to its end."""
    from core.contract import RESULT_FILE, ChildResult, read_message
    from runner.run.process.supervision import Supervisor, spawn_worker

    gate_path, folder, environment = gated_child(tmp_path)
    other = os.open(gate_path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(other, fcntl.LOCK_EX)
    started = time.monotonic()
    spawned: list = []
    stop = threading.Event()

    def spawn():
        spawned.append(spawn_worker(folder, environment))
        return spawned[0]

    def release_once_waited_past_the_timeout():
        # Held until the child waits on it, and until the timeout has passed since the start:
        # a loaded host may take most of the timeout to bring the child to its wait.
        while not stop.is_set() and not (spawned and waits_for_flock(spawned[0].pid)):
            stop.wait(0.05)
        stop.wait(max(0.0, started + TIMEOUT_S + 2 - time.monotonic()))
        fcntl.flock(other, fcntl.LOCK_UN)

    releaser = threading.Thread(target=release_once_waited_past_the_timeout, daemon=True)
    releaser.start()
    try:
        outcome = Supervisor(TIMEOUT_S, None, False, None, threading.Event()).run(
            folder, tmp_path / "scratch", spawn)
    finally:
        stop.set()
        releaser.join()
        os.close(other)
    assert not outcome.timed_out and outcome.returncode == 0, outcome.output_tail
    assert outcome.wall_seconds > TIMEOUT_S
    waited = read_message(folder / RESULT_FILE, ChildResult).summary["device_gate"]["waited_s"]
    assert waited > outcome.wall_seconds - TIMEOUT_S


#: Time enough for the child's own work (start, build, compile, runs) on a loaded 2-core host:
#: beside the suite's other workers it took over 15 s once.
TIMEOUT_S = 40.0


def waits_for_flock(pid: int) -> bool:
    """Whether `pid` is blocked on an flock (a "->" line of /proc/locks names it)."""
    with open("/proc/locks") as locks:
        return any(line.split()[1:3] == ["->", "FLOCK"] and line.split()[5] == str(pid)
                   for line in locks)


def _touch(path: str) -> str:
    deadline = time.monotonic() + 60
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)
    return path
