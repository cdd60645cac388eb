import math

import pytest

from reports.cli import compare_main, score_main
from reports.analyse.compare import IMPROVED, NEWLY_FAILING, NOISE, REGRESSED, UNCHANGED, UNRELIABLE, compare
from reports.read.load import load
from reports.analyse.score import score
from tests.reports.conftest import craft_line

BASE = {"mlp": [1.00, 1.02, 0.98, 1.01], "cnn": [2.0, 2.04, 1.98, 2.02], "transformer_block": [3.0, 3.1, 2.9, 3.05]}


def _lines(times_by_model, stack="inductor", **kwargs):
    return [craft_line(m, stack, times=t, **kwargs) for m, t in times_by_model.items()]


def _scaled(factors):
    return {m: [v * factors.get(m, 1.0) for v in t] for m, t in BASE.items()}


def test_compare_flags_a_significant_regression_and_exits_1(write_results, capsys):
    base = write_results(_lines(BASE))
    new = write_results(_lines(_scaled({"mlp": 1.20, "cnn": 0.80})))
    result = compare(load([base]).records, load([new]).records)
    verdicts = {c.base.model: c.verdict for c in result.changes}
    assert verdicts == {"mlp": REGRESSED, "cnn": IMPROVED, "transformer_block": UNCHANGED}
    assert {c.base.model: c.ratio for c in result.changes}["mlp"] == pytest.approx(1.2)
    assert result.geomean_ratio == pytest.approx((1.2 * 0.8) ** (1 / 3))
    assert compare_main([str(base), str(new)]) == 1
    assert "regressed" in capsys.readouterr().out


def test_compare_exits_0_without_regression(write_results):
    base = write_results(_lines(BASE))
    same = write_results(_lines(_scaled({"mlp": 1.03, "cnn": 0.9})))
    assert compare_main([str(base), str(same)]) == 0


def test_compare_overlapping_repeats_are_noise_not_regression(write_results):
    base = write_results(_lines({"mlp": [1.0, 2.0, 1.1, 1.9]}))
    new = write_results(_lines({"mlp": [1.1, 2.2, 1.3, 2.1]}))  # median +13% but overlapping
    result = compare(load([base]).records, load([new]).records, geomean_threshold=0.5)
    assert result.changes[0].ratio > 1.07
    assert result.changes[0].verdict == NOISE
    assert not result.regressed


def test_compare_geomean_regression_alone_fails(write_results):
    base = write_results(_lines(BASE))
    new = write_results(_lines(_scaled({m: 1.05 for m in BASE})))  # 5% each: under 7%, over 1%
    result = compare(load([base]).records, load([new]).records)
    assert not result.regressions and result.geomean_regressed
    assert compare_main([str(base), str(new)]) == 1
    assert compare_main([str(base), str(new), "--geomean-threshold", "6%"]) == 0


def test_compare_newly_failing_is_a_regression(write_results):
    base = write_results(_lines(BASE))
    new_lines = _lines({m: t for m, t in BASE.items() if m != "cnn"})
    new_lines.append(craft_line("cnn", "inductor", status="failed", code="VERIFIER_DIDNT_RUN", error="RuntimeError: oom"))
    new = write_results(new_lines)
    result = compare(load([base]).records, load([new]).records)
    failing = [c for c in result.regressions if c.verdict == NEWLY_FAILING]
    assert [c.base.model for c in failing] == ["cnn"] and "oom" in failing[0].reason
    assert compare_main([str(base), str(new)]) == 1


def test_score_of_the_reference_is_1000(write_results, capsys):
    ref = write_results(_lines(BASE))
    assert score(load([ref]).records, load([ref]).records).score == 1000.0
    assert score_main([str(ref), "--reference", str(ref)]) == 0
    assert "score: 1000.0" in capsys.readouterr().out


def test_score_is_1000_times_geomean_and_lists_what_was_left_out(write_results):
    factors = {"mlp": 0.5, "cnn": 1.25}
    ref_lines = _lines(BASE) + [craft_line("mlp", "eager", times=[9.0])]
    ref = write_results(ref_lines)
    new_lines = _lines({m: t for m, t in _scaled(factors).items() if m != "transformer_block"})
    new_lines.append(craft_line("transformer_block", "inductor", status="failed", code="VERIFIER_DIDNT_RUN", error="boom"))
    new_lines.append(craft_line("cnn", "PJRT", times=[1.0]))
    new = write_results(new_lines)
    result = score(load([new]).records, load([ref]).records)
    expected = 1000 * math.exp(sum(math.log(1 / f) for f in factors.values()) / len(factors))
    assert result.score == pytest.approx(expected)
    assert result.experiments == 2
    reasons = {item.experiment.split(" ")[0] + " " + item.experiment.split("[")[1].split()[1]: item.reason for item in result.left_out}
    assert reasons["builtin/transformer_block inductor"].startswith("failed in the measured run")
    assert reasons["builtin/mlp eager"] == "only in the reference"
    assert reasons["builtin/cnn PJRT"] == "not in the reference"


def test_score_with_nothing_in_common_is_an_error(write_results, capsys):
    ref = write_results(_lines({"mlp": [1.0]}))
    new = write_results(_lines({"cnn": [1.0]}))
    assert score_main([str(new), "--reference", str(ref)]) == 2
    assert "nothing to score" in capsys.readouterr().err


def test_a_change_between_flagged_lines_is_unreliable_not_a_regression(write_results, capsys):
    base = write_results(_lines(BASE))
    slower = _lines(_scaled({"mlp": 1.20}))
    for line in slower:
        line["summary"].update(unreliable=True, unreliable_reasons=[
            "contention: other processes used 54% of the 2 core(s) this child was pinned to"])
    new = write_results(slower)
    result = compare(load([base]).records, load([new]).records)
    mlp = next(c for c in result.changes if c.base.model == "mlp")
    assert mlp.verdict == UNRELIABLE and mlp.reason.startswith("new: contention")
    assert not result.regressions
    assert {c.verdict for c in result.changes if c.base.model != "mlp"} == {UNCHANGED}
    compare_main([str(base), str(new)])
    assert "unreliable" in capsys.readouterr().out


def test_a_change_the_reference_workload_made_too_is_unreliable(write_results):
    """Eager lines have no paired speedup: the reference workload, timed in each child
    (summary.slow_period.ratio against this host's usual figure), says the machine ran 30%
    slower in NEW, as the experiment did; an experiment slower on its own is a regression."""
    def lines(scale, reference):
        made = _lines(_scaled({"mlp": scale}), stack="eager")
        for line in made:
            line["summary"]["slow_period"] = {"ratio": reference, "flagged": False}
        return made

    base = write_results(lines(1.0, 1.0))
    result = compare(load([base]).records, load([write_results(lines(1.3, 1.3))]).records)
    mlp = next(c for c in result.changes if c.base.model == "mlp")
    assert mlp.verdict == UNRELIABLE and not result.regressions
    assert mlp.reason == "the machine changed speed: the reference workload +30.0% too"
    result = compare(load([base]).records, load([write_results(lines(1.3, 1.0))]).records)
    assert next(c for c in result.changes if c.base.model == "mlp").verdict == REGRESSED


def test_a_host_bound_line_is_gated_by_its_device_busy_time(write_results):
    """On CUDA a host-bound line's latency follows the host's speed: the gate judges the
    kernels' summed time instead, or says why it cannot."""
    def lines(scale, busy_ms, host_bound=True, reason=None):
        made = _lines(_scaled({"mlp": scale}), accelerator="cuda")
        for line in made:
            line["summary"].update(host_bound=host_bound, host_bound_fraction=1.0 * host_bound,
                                   device_busy_ms=busy_ms,
                                   device_busy={"ms": busy_ms, "reason": reason})
        return made

    base = write_results(lines(1.0, 0.50))

    def verdict(new_lines):
        result = compare(load([base]).records, load([write_results(new_lines)]).records)
        return next(c for c in result.changes if c.base.model == "mlp"), result

    # The host ran 30% slower, the kernels did not change: not a regression.
    mlp, result = verdict(lines(1.3, 0.51))
    assert mlp.verdict == UNRELIABLE and not result.regressions
    assert mlp.busy_ratio == pytest.approx(1.02)
    assert mlp.reason.startswith("host-bound: latency +30.0% while the device busy time +2.0%")
    # The kernels took 20% longer while the latency held: a regression the latency hides.
    mlp, result = verdict(lines(1.0, 0.60))
    assert mlp.verdict == REGRESSED and mlp in result.regressions
    assert mlp.reason == "host-bound: judged by its device busy time +20.0% (latency +0.0%)"
    mlp, _ = verdict(lines(0.98, 0.50))
    assert mlp.verdict == UNCHANGED and mlp.reason == "host-bound: device busy time +0.0%"
    # Without the busy time on one side, the latency decides, and the note says why.
    mlp, _ = verdict(lines(1.3, None, reason="the profiler failed: RuntimeError: CUPTI"))
    assert mlp.verdict == REGRESSED
    assert mlp.reason.endswith("host-bound: judged by its latency, which follows the host's "
                               "speed (the profiler failed: RuntimeError: CUPTI)")
    # A line that is not host-bound keeps its latency's verdict.
    card = write_results(lines(1.0, 0.50, host_bound=False))
    result = compare(load([card]).records,
                     load([write_results(lines(1.3, 0.50, host_bound=False))]).records)
    assert next(c for c in result.changes if c.base.model == "mlp").verdict == REGRESSED


def test_a_contended_cpu_line_on_a_core_that_changed_speed_is_judged_in_host_pulses(
        write_results):
    """On a shared host a core runs at times 1.7x slower (another tenant on the physical
    core): the CPU time per iteration moves as much as the latency, and so does the host
    pulse read after each run. Where the pulse moved beyond the threshold, the CPU time in
    pulses decides; a line without it (written before it) leaves the change unreliable."""
    def lines(scale, cpu_ms, pulse_ms, in_pulses=True):
        made = _lines(_scaled({"mlp": scale}), stack="eager")
        for line in made:
            found = {"ms": cpu_ms, "pulse_ms": pulse_ms}
            if in_pulses:
                found["in_pulses"] = cpu_ms / pulse_ms
            line["summary"].update(contended=True, unreliable=False, unreliable_reasons=[],
                                   cpu_time_ms=cpu_ms, cpu_time=found)
        return made

    base = write_results(lines(1.0, 0.50, 0.25))

    def verdict(new_lines, **options):
        result = compare(load([base]).records, load([write_results(new_lines)]).records,
                         **options)
        return next(c for c in result.changes if c.base.model == "mlp"), result

    # The same work on a slower core: its CPU time +70%, its pulse too; not a regression.
    mlp, result = verdict(lines(1.7, 0.85, 0.425))
    assert mlp.core_moved and mlp.pulse_ratio == pytest.approx(1.7)
    assert mlp.verdict == UNRELIABLE and not result.regressions, mlp.reason
    assert "judged" not in mlp.reason and "CPU time over the host pulse's +0.0%" in mlp.reason
    # 30% more work on that slower core: a regression, judged in pulses.
    mlp, result = verdict(lines(2.21, 1.105, 0.425))
    assert mlp.verdict == REGRESSED and mlp in result.regressions
    assert mlp.reason == ("contended, the core's speed +70.0%: judged by its CPU time over the "
                          "host pulse's +30.0% (latency +121.0%), CPU time per iteration "
                          "+121.0%")
    # Without the figure in pulses the CPU time says nothing of the work: unreliable...
    mlp, result = verdict(lines(1.7, 0.85, 0.425, in_pulses=False))
    assert mlp.verdict == UNRELIABLE and not result.regressions
    assert mlp.reason == ("contended: CPU time per iteration +70.0% while the core's own "
                          "speed moved: its host pulse +70.0%")
    # ...unless unreliable changes are counted.
    mlp, _ = verdict(lines(1.7, 0.85, 0.425, in_pulses=False), count_unreliable=True)
    assert mlp.verdict == REGRESSED
    # A pulse within the threshold: the CPU time decides, as on any contended line.
    mlp, _ = verdict(lines(1.3, 0.65, 0.26))
    assert not mlp.core_moved and mlp.verdict == REGRESSED
    assert mlp.reason.startswith("contended: judged by its CPU time per iteration +30.0%")
    # A pulse that moved alone (its own noise: the CPU time held) is not the core's speed:
    # in pulses the work would read +72%; the CPU time decides.
    mlp, _ = verdict(lines(1.03, 0.515, 0.15))
    assert not mlp.core_moved and mlp.verdict == UNCHANGED, mlp.reason


def test_a_contended_cpu_line_is_gated_by_its_timing_threads_cpu_time(write_results):
    """Other processes on a child's cores stretch its latency, and far less the CPU time its
    one compute thread spends per iteration: where the flags are trusted (not set, as the
    bisection's --trust-flagged leaves them) or counted, the gate judges that; a flagged line
    stays unreliable, the CPU time's change in its note."""
    def lines(scale, cpu_ms, contended=True, flagged=False):
        made = _lines(_scaled({"mlp": scale}), stack="eager")
        for line in made:
            reasons = ["contention: other processes used 50% of the 1 core(s)"] * flagged
            line["summary"].update(contended=contended, unreliable=flagged,
                                   unreliable_reasons=reasons, cpu_time_ms=cpu_ms,
                                   cpu_time={"ms": cpu_ms})
        return made

    base = write_results(lines(1.0, 0.50, contended=False))

    def verdict(new_lines, **options):
        result = compare(load([base]).records, load([write_results(new_lines)]).records,
                         **options)
        return next(c for c in result.changes if c.base.model == "mlp"), result

    # Waiting for the core doubled the latency; the thread's work held: not a regression.
    mlp, result = verdict(lines(2.0, 0.51))
    assert mlp.verdict == UNRELIABLE and not result.regressions
    assert mlp.cpu_ratio == pytest.approx(1.02)
    assert mlp.reason == ("contended: latency +100.0% while the CPU time per iteration +2.0%: "
                          "other processes took its cores' time, not its own work")
    # The work grew 30% under the contention: a regression, whatever the wait added.
    mlp, result = verdict(lines(2.6, 0.65))
    assert mlp.verdict == REGRESSED and mlp in result.regressions
    assert mlp.reason == "contended: judged by its CPU time per iteration +30.0% (latency +160.0%)"
    mlp, _ = verdict(lines(1.5, 0.40))
    assert mlp.verdict == IMPROVED
    # A flagged line stays unreliable (contention raises the CPU time too), with the note;
    # counted (--count-unreliable), the CPU time decides.
    mlp, result = verdict(lines(2.6, 0.65, flagged=True))
    assert mlp.verdict == UNRELIABLE and not result.regressions and mlp.cpu_ratio == pytest.approx(1.3)
    assert mlp.reason.startswith("contended: CPU time per iteration +30.0%; new: contention")
    mlp, _ = verdict(lines(2.0, 0.51, flagged=True), count_unreliable=True)
    assert mlp.verdict == UNRELIABLE and mlp.reason.startswith("contended: latency +100.0%")
    # Without the figure on one side the latency decides.
    mlp, _ = verdict(lines(2.0, None))
    assert mlp.verdict == REGRESSED and mlp.cpu_ratio is None
    # Neither side contended: the latency decides.
    mlp, _ = verdict(lines(1.3, 0.50, contended=False))
    assert mlp.verdict == REGRESSED and mlp.cpu_ratio is None

def test_a_change_says_when_the_compiled_kernels_or_their_tuning_differ(write_results):
    """Two compiles of one graph launch the same kernels; their tuning may keep other launch
    shapes (a card-bound figure moved 6% so). The note tells that from other code."""
    def lines(scale, kernels, launches):
        made = _lines(_scaled({"mlp": scale}), accelerator="cuda")
        for line in made:
            line["summary"]["device_busy"] = {"ms": 0.5, "reason": None, "digests": {
                "kernels": kernels, "launches": launches, "count": 12}}
        return made

    base = write_results(lines(1.0, "k1", "l1"))

    def change(new_lines):
        result = compare(load([base]).records, load([write_results(new_lines)]).records)
        return next(c for c in result.changes if c.base.model == "mlp")

    tuned = change(lines(1.2, "k1", "l2"))
    assert tuned.verdict == REGRESSED
    assert tuned.reason == "the same kernels tuned otherwise (other launch shapes)"
    other = change(lines(1.2, "k2", "l2"))
    assert other.verdict == REGRESSED and other.reason == "other kernels (the compiled code differs)"
    assert change(lines(1.2, "k1", "l1")).reason == ""
    # A side without digests (a CPU line, a line written before them) says nothing of it.
    plain = _lines(_scaled({"mlp": 1.2}), accelerator="cuda")
    assert change(plain).reason == ""
    noted = change(lines(1.01, "k1", "l2"))
    assert noted.verdict == UNCHANGED and noted.reason.startswith("the same kernels tuned")
