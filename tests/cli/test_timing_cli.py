"""Timing flags through the real CLI: precision, modes, threads, pairing, contention."""

from __future__ import annotations

import json
import multiprocessing
import os
import statistics
import time

import pytest

from core.host.host_state import FAST_BOUND_OVER_LOW, low_pulse

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)

EAGER = ["--accelerator=cpu", "--xla=None", "--test=eval", "-k", "^mlp$", "--repeat=3",
         "--warmup=1"]


def spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def spin_on(core: int, seconds: float) -> None:
    """Spin on `core`, in a session of its own: with the kernel's autogroups, a session's
    processes share one slice of a core, so a spinner in the test's session would compete
    with the test's other processes rather than with a child (which has its own session)."""
    os.setsid()
    os.sched_setaffinity(0, [core])
    spin(seconds)


def test_precision_threads_and_unpaired_timing_reach_the_child(run_cli):
    # A dynamo stack, as it is timed paired with eager unless told otherwise; aot_eager, not
    # inductor: the flags reach the child alike, without inductor's C++ compiles (a CPU
    # compile of the MLP cost 10 to 15 s of this test's 25). An inductor line's default
    # mode is checked on tests/cli/test_cli.py's sweep.
    run = run_cli(*EAGER, "--dynamo=aot_eager", "--matmul-precision=highest", "--threads=1",
                  "--no-paired-timing")
    assert run.returncode == 0, run.stderr
    (line,) = run.lines()
    assert line["experiment"]["matmul_precision"] == "highest"
    settings = line["environment"]["torch_settings"]
    assert settings["float32_matmul_precision"] == "highest" and settings["num_threads"] == 1
    assert line["summary"]["cpu"]["threads"] == 1
    assert "paired_speedup" not in line["summary"] and "eager_per_iter_time" not in line["metrics"]


def test_the_default_is_tf32_on_and_disable_tf32_turns_it_off(run_cli, tmp_path):
    default = run_cli(*EAGER, "--dynamo=None", output_dir=tmp_path / "default")
    strict = run_cli(*EAGER, "--dynamo=None", "--disable-tf32", output_dir=tmp_path / "strict")
    assert default.returncode == 0 and strict.returncode == 0, strict.stderr
    (loose,) = default.lines()
    (full,) = strict.lines()
    assert loose["experiment"]["matmul_precision"] == "high"
    assert loose["environment"]["torch_settings"]["float32_matmul_precision"] == "high"
    assert loose["environment"]["torch_settings"]["cudnn_allow_tf32"] is True
    assert full["experiment"]["disable_tf32"] is True
    assert full["environment"]["torch_settings"]["float32_matmul_precision"] == "highest"
    assert full["environment"]["torch_settings"]["cudnn_allow_tf32"] is False
    assert loose["fingerprint"] != full["fingerprint"]


def test_modes_are_a_dimension_with_reasons_for_what_cannot_run(run_cli):
    run = run_cli(*EAGER, "--dynamo=inductor", "--dynamo=aot_eager", "--mode=default",
                  "--mode=dynamic", "--mode=cudagraphs", "--dry-run", "--log-level=debug")
    assert run.returncode == 0, run.stderr
    assert "[inductor]" in run.stdout and "[inductor:dynamic]" in run.stdout
    assert "[aot_eager]" in run.stdout and "cudagraphs]" not in run.stdout
    assert "mode=cudagraphs needs CUDA" in run.stderr
    assert "mode=dynamic applies only to dynamo=inductor" in run.stderr


@pytest.mark.runner_defaults  # a thread per core, as contention hits a child by default
def test_a_loaded_machine_flags_the_line_as_unreliable(run_cli):
    context = multiprocessing.get_context("spawn")
    hogs = [context.Process(target=spin, args=(120.0,)) for _ in os.sched_getaffinity(0)]
    for hog in hogs:
        hog.start()
    try:
        run = run_cli(*EAGER, "--dynamo=None")
    finally:
        for hog in hogs:
            hog.terminate()
            hog.join()
    assert run.returncode == 0, run.stderr
    (line,) = run.lines()
    summary = line["summary"]
    assert summary["unreliable"] is True, summary
    assert any(reason.startswith("contention") for reason in summary["unreliable_reasons"])
    assert summary["cpu"]["others_fraction"] > 0.3
    assert summary["contended"] is True


def test_the_timing_threads_cpu_time_holds_on_a_loaded_machine(run_cli, tmp_path):
    """One compute thread: a process spinning on each core, pinned there, stretches an
    iteration's wall time and moves its CPU time less (the figure compare judges a contended
    line by where flags are trusted). Each timed run lasts far longer than the scheduler's
    slices (500 iterations of about 0.35 ms): a short one fits in a slice and is seldom
    stretched. How far the CPU time moves is the host's, not the runner's: alone here, the
    wall time 2.0 to 2.7x the quiet run's and the CPU time +1 to +34%; beside the suite's
    other processes the quiet run's own CPU time is 35 to 55% above that, and the loaded one
    moved 0.96 to 1.70x against the wall time's 1.47 to 2.53x (the figures:
    docs/timing.md, "CPU time per iteration")."""
    steps = [*EAGER, "--dynamo=None", "--threads=1", "--repeat=5", "--iterations-per-run=500",
             "--no-paired-timing"]
    quiet = run_cli(*steps, output_dir=tmp_path / "quiet")
    context = multiprocessing.get_context("spawn")
    hogs = [context.Process(target=spin_on, args=(core, 120.0))
            for core in sorted(os.sched_getaffinity(0))]
    for hog in hogs:
        hog.start()
    try:
        loaded = run_cli(*steps, output_dir=tmp_path / "loaded")
    finally:
        for hog in hogs:
            hog.terminate()
            hog.join()
    assert quiet.returncode == 0 and loaded.returncode == 0, loaded.stderr
    (alone,), (busy,) = quiet.lines(), loaded.lines()
    assert busy["summary"]["contended"] is True, busy["summary"]["unreliable_reasons"]
    cpu = {name: line["summary"]["cpu_time"] for name, line in (("alone", alone), ("busy", busy))}
    assert all(found["timing_thread_share"] > 0.9 for found in cpu.values()), cpu
    latency = {name: statistics.median(line["metrics"]["per_iter_time"][1:])
               for name, line in (("alone", alone), ("busy", busy))}
    # The loaded child waited for its core (a spinner of its own session on each core leaves
    # it half of one at most): its wall time is well above its CPU time, which is not the
    # wall time...
    assert latency["busy"] > 1.3 * busy["summary"]["cpu_time_ms"] / 1e3, (latency, cpu)
    # ...and which moved less than the wall time did: the wait stayed out of it.
    moved = {name: busy_figure / alone_figure for name, busy_figure, alone_figure in (
        ("cpu", busy["summary"]["cpu_time_ms"], alone["summary"]["cpu_time_ms"]),
        ("latency", latency["busy"], latency["alone"]))}
    assert moved["cpu"] < moved["latency"] - 0.2, (moved, cpu)

@pytest.mark.runner_defaults  # the reference workload
def test_several_timing_processes_and_the_reference_workload_reach_the_line(run_cli):
    run = run_cli(*EAGER, "--dynamo=None", "--processes=2")
    assert run.returncode == 0, run.stderr
    (line,) = run.lines()
    summary, metrics = line["summary"], line["metrics"]
    assert line["experiment"]["processes"] == 2
    assert set(line["artifacts"]) == {"time", "time-2"}
    processes = summary["processes"]
    assert processes["count"] == 2 and len(processes["medians"]) == 2
    assert processes["median"] == statistics.median(processes["medians"])
    assert metrics["process"] == [1, 1, 1, 1, 2, 2, 2]  # the cold start, then 3 runs each
    # The reference workload ran before each process's timed runs, and not after them:
    # these take far less than the ten tries whose cost a reading after would be worth; the
    # line was judged against this host's usual figure (or says why it could not be).
    references = summary["reference_processes"]
    assert len(references) == 2
    assert all(each["before"]["launch_us"] > 0 and each["before"]["kernel_ms"] > 0
               and each["after"] is None and each["during"]["host_ms"] > 0
               for each in references)
    assert "ratio" in summary["slow_period"] and "flagged" in summary["slow_period"]
    # The timing thread's CPU time over each pulse: the core's own speed, and the iteration's
    # CPU time in its units, run by run (the median of the runs' ratios, near the ratio of
    # the medians).
    cpu = summary["cpu_time"]
    assert cpu["pulse_ms"] > 0 and cpu["in_pulses"] > 0, cpu
    assert 0.5 < cpu["in_pulses"] * cpu["pulse_ms"] / cpu["ms"] < 2.0, cpu
    # Each run's pulse sorts it into the host's fast or slow state; both states' figures
    # are of these six runs, against a bound above the line's low pulse, or above this
    # host's usual one where that is lower (a line timed wholly in a slow period, as beside
    # the suite's other processes).
    states = summary["pulse_states"]
    pulses = [pulse for each in references for pulse in each["during"]["pulses_ms"]]
    line_bound = FAST_BOUND_OVER_LOW * low_pulse(pulses)
    assert states["runs"] == 6, states
    if states["low_from"] == "line":
        assert states["fast_bound_ms"] == pytest.approx(line_bound), states
    else:
        assert states["low_from"] == "host" and states["fast_bound_ms"] <= line_bound, states
    assert states["fast"]["runs"] + states["slow"]["runs"] == 6
    assert states["fast"]["runs"] == sum(pulse <= states["fast_bound_ms"] for pulse in pulses)
    assert abs(states["fast"]["share"] + states["slow"]["share"] - 1.0) < 1e-9
    # A state's figure counts a process with three runs in it (here: all of its runs).
    timed, bound = metrics["per_iter_time"][1:], states["fast_bound_ms"]
    for state, runs in (("fast", [time for time, pulse in zip(timed, pulses) if pulse <= bound]),
                        ("slow", [time for time, pulse in zip(timed, pulses) if pulse > bound])):
        figure = states[state]["median_per_iter_time"]
        assert (figure is None) == (states[state]["processes"] == 0), states
        assert figure is None or min(runs) <= figure <= max(runs), states
    if states["fast"]["runs"] == 6:
        assert states["fast"]["median_per_iter_time"] == summary["processes"]["median"]
    # Every run at the low pulse: a CPU line is never card-bound, so it has the figure, each
    # process's the median of its runs' times scaled by the low pulse over each one's pulse.
    scaled, low = states["at_low_pulse"], states["fast_bound_ms"] / FAST_BOUND_OVER_LOW
    assert scaled["pulse_ms"] == pytest.approx(low)
    for process, (first, last) in enumerate(((0, 3), (3, 6))):
        expected = statistics.median(time * low / pulse for time, pulse
                                     in zip(timed[first:last], pulses[first:last]))
        assert scaled["processes"][process] == pytest.approx(expected), scaled
    assert scaled["median_per_iter_time"] == pytest.approx(statistics.median(scaled["processes"]))


def child_torch_settings(run, name: str) -> dict:
    (line,) = run.lines()
    folder = run.output_dir / line["artifacts"][name]
    return json.loads((folder / "result.json").read_text())["environment"]["torch_settings"]


def test_later_processes_start_no_compile_workers_where_the_caches_are_warm(run_cli, tmp_path,
                                                                            monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "2")  # the runner's; the tests' is 1
    shared = run_cli(*EAGER, "--dynamo=inductor", "--processes=2",
                     output_dir=tmp_path / "shared")
    assert shared.returncode == 0, shared.stderr
    first, second = (child_torch_settings(shared, name) for name in ("time", "time-2"))
    assert first["inductor_compile_threads"] == 2 and second["inductor_compile_threads"] == 1
    # (With --process-caches=fresh no process is told its caches are warm:
    # tests/runner/run/test_time_processes.py.)


def test_a_compile_cache_kept_across_runs_makes_the_second_compile_a_cache_hit(run_cli, tmp_path):
    caches = tmp_path / "caches"
    flags = (*EAGER, "--dynamo=inductor", "--collect-dynamo-counters",
             f"--compile-cache={caches}")
    runs = [run_cli(*flags, output_dir=tmp_path / name) for name in ("first", "second")]
    hits = []
    for run in runs:
        assert run.returncode == 0, run.stderr
        (line,) = run.lines()
        assert line["status"] == "ok", line["metrics"].get("error")
        assert line["summary"]["compile_cache"] == str(caches)
        inductor = line["summary"]["dynamo_counters"][0].get("inductor", {})
        hits.append((inductor.get("fxgraph_cache_miss", 0), inductor.get("fxgraph_cache_hit", 0)))
    assert hits[0][0] >= 1 and hits[0][1] == 0  # the first compiles
    assert hits[1][0] == 0 and hits[1][1] >= 1  # the second loads what the first compiled
    assert (caches / "inductor").is_dir()
    # The probe made inductor's vector-ISA checks for the host: no child built their
    # programs (backends/runtimes/inductor_host.py).
    programs = [path for path in caches.rglob("*.cpp") if "_chk_kernel" in path.read_text()]
    assert not programs, programs
