import math
import random

import pytest

from reports.read.columnar import Engine
from reports.analyse.compare import NEWLY_FAILING, REGRESSED, compare
from reports.analyse.history import compute_history, geomean_change
from reports.read.load import load, select_records
from reports.stats import permutation_p_value, rank_sum_p_from_u
from tests.reports.conftest import craft_line

EAGER = {"mlp": 1.0, "cnn": 2.0, "transformer_block": 3.0}


def _night(night, inductor, failing=(), code="PASS"):
    """One run: eager and inductor for each model, three repeats each."""
    run, stamp = f"night-{night}", 1000.0 * night
    lines = []
    for model, t in EAGER.items():
        lines.append(craft_line(model, "eager", times=[t, t * 1.01, t * 0.99], code=code, run_id=run,
                                timestamp=stamp, cold_start=t))
        if model in failing:
            lines.append(craft_line(model, "inductor", status="failed", code="VERIFIER_DIDNT_RUN",
                                    error="RuntimeError: boom", run_id=run, timestamp=stamp))
        else:
            s = inductor[model]
            lines.append(craft_line(model, "inductor", times=[s, s * 1.01, s * 0.99], code=code, run_id=run,
                                    timestamp=stamp, cold_start=s + 5.0))
    return lines


@pytest.fixture
def nights(write_results):
    fast = {"mlp": 0.5, "cnn": 1.0, "transformer_block": 1.5}
    slower = dict(fast, mlp=0.6, cnn=0.98)  # mlp +20% (all three repeats slower), cnn -2%
    lines = _night(0, fast) + _night(1, fast, code="VERIFIER_SKIPPED") + _night(2, slower, failing=("transformer_block",))
    return write_results(lines)


def _history(path):
    engine = Engine(None)
    loaded = load([path], engine=engine)
    return engine, loaded, compute_history(engine, loaded.files, loaded.runs, "eager")


def _point(history, run, stack):
    (point,) = [p for p in history.points if p.run == run and p.config.stack == stack]
    return point


def test_points_hold_the_four_metrics_of_each_run(nights):
    engine, loaded, history = _history(nights)
    with engine:
        assert [r.run_id for r in history.runs] == ["night-0", "night-1", "night-2"]
        first = _point(history, 0, "inductor")
        assert (first.counted, first.verified, first.accurate, first.failed) == (3, 3, 3, 0)
        assert math.exp(first.log_speedup / first.speedups) == pytest.approx(2.0)
        assert first.compile_sum / first.compiles == pytest.approx(5.0, abs=0.01)
        assert first.ratios == 0  # host memory only: no compression ratio
        unverified = _point(history, 1, "inductor")
        assert (unverified.counted, unverified.verified) == (3, 0)
        last = _point(history, 2, "inductor")
        assert (last.verified, last.accurate, last.failed, last.speedups) == (2, 2, 1, 2)
        expected = math.sqrt((1.0 / 0.6) * (2.0 / 0.98))
        assert math.exp(last.log_speedup / last.speedups) == pytest.approx(expected, rel=1e-6)


def test_transitions_follow_the_compare_rules(nights):
    engine, loaded, history = _history(nights)
    with engine:
        (step,) = [t for t in history.transitions if t.run == 2 and t.config.stack == "inductor"]
        assert (step.regressed, step.improved, step.newly_failing, step.common) == (1, 0, 1, 2)
        assert geomean_change([step]) == pytest.approx(math.sqrt(1.2 * 0.98))
        quiet = [t for t in history.transitions if t.run == 1]
        assert all(t.regressed == t.improved == t.newly_failing == 0 for t in quiet)
        # The same verdicts as `compare` on the two runs' records.
        base, _ = select_records(engine, loaded.files, "night-1")
        new, _ = select_records(engine, loaded.files, "night-2")
        inductor = [c for c in compare(base, new).changes if c.base.config.stack == "inductor"]
        verdicts = sorted(c.verdict for c in inductor if c.verdict in (REGRESSED, NEWLY_FAILING))
        assert verdicts == [NEWLY_FAILING, REGRESSED]


def test_p_value_from_u_matches_the_permutation_test():
    rng = random.Random(7)
    for _ in range(400):
        base = [rng.random() for _ in range(rng.randint(2, 9))]
        new = [rng.random() * rng.choice([1.0, 1.5, 3.0]) for _ in range(rng.randint(2, 9))]
        u = sum((y > x) + 0.5 * (y == x) for x in base for y in new)
        assert rank_sum_p_from_u(u, len(base), len(new)) == pytest.approx(permutation_p_value(base, new), abs=1e-12)
    assert rank_sum_p_from_u(3.0, 1, 3) is None


def _figures(history):
    points = [(p.run, p.config, p.suite, p.counted, p.skipped, p.verified, p.accurate, p.failed, p.speedups,
               round(p.log_speedup, 9), p.compiles, round(p.compile_sum, 9), p.ratios) for p in history.points]
    steps = [(t.run, t.config, t.suite, t.common, round(t.log_change, 9), t.regressed, t.improved, t.noise,
              t.newly_failing, t.fixed) for t in history.transitions]
    return points, steps


def test_a_retry_within_a_run_counts_once_the_latest_attempt(write_results):
    """With a retried experiment the history picks each run's latest line per experiment;
    without one every line is taken as it is. Both give what the retry's absence gives."""
    fast = {"mlp": 0.5, "cnn": 1.0, "transformer_block": 1.5}
    nights = _night(0, fast) + _night(1, fast) + _night(2, dict(fast, mlp=0.6))
    # A first attempt of night-2's inductor cnn, failed and written before the retry.
    attempt = craft_line("cnn", "inductor", status="failed", code="VERIFIER_DIDNT_RUN", error="boom",
                         run_id="night-2", timestamp=2000.0)
    attempt["finished_at"] = 1999.0
    plain, retried = write_results(nights), write_results(nights[:-3] + [attempt] + nights[-3:])
    engine, _, without = _history(plain)
    engine.close()
    engine, loaded, with_retry = _history(retried)
    engine.close()
    assert loaded.total_lines == len(nights) + 1
    assert _figures(with_retry) == _figures(without)
    (step,) = [t for t in without.transitions if t.run == 2 and t.config.stack == "inductor"]
    assert (step.common, step.regressed, step.newly_failing) == (3, 1, 0)


def test_points_and_transitions_come_by_run_configuration_and_suite(write_results):
    from tests.reports.conftest import STACKS

    lines = [craft_line(model, stack, times=[t * (1 + night / 10)] * 3, run_id=f"night-{night}",
                        timestamp=1000.0 * night, precision=precision, accelerator=accelerator)
             for night in range(2) for t, model in ((1.0, "mlp"), (2.0, "cnn")) for stack in STACKS
             for precision in ("fp32", "bf16") for accelerator in ("cpu", "CPU-ü")]
    engine, _, history = _history(write_results(lines))
    engine.close()
    assert len(history.points) == 2 * len(STACKS) * 2 * 2 and len(history.transitions) == len(history.points) // 2
    for items in (history.points, history.transitions):
        assert items == sorted(items, key=lambda item: (item.run, item.config, item.suite))


def test_a_compiler_switch_has_the_same_speedup_in_the_dashboard_and_the_history(write_results):
    """An inductor line at fullgraph=True without a paired speedup, beside its eager
    baseline: fullgraph is not shared with the baseline (core.fields), so both the
    dashboard's row and the history compare it against eager at 2.0."""
    from reports.analyse.aggregate import build_report
    from reports.analyse.dashboard import build_payload

    fullgraph = craft_line("mlp", "inductor", times=[0.5, 0.5, 0.5], code="PASS", run_id="r", timestamp=1.0)
    fullgraph["experiment"]["fullgraph"] = True
    assert "paired_speedup" not in fullgraph.get("summary", {})
    path = write_results([craft_line("mlp", "eager", times=[1.0, 1.0, 1.0], code="PASS", run_id="r",
                                     timestamp=1.0), fullgraph])
    engine, loaded, history = _history(path)
    with engine:
        report = build_report(loaded.records, "eager")
        payload = build_payload("t", [], report, history)
        configs = payload["configs"]
        (row,) = [r for r in payload["rows"] if configs[r["c"]]["stack"] == "inductor"]
        assert configs[row["c"]]["label"] == "cpu inductor eval fp32 fullgraph=True"
        assert row["sp"] == pytest.approx(2.0)
        point = _point(history, 0, "inductor")
        assert point.config == report.rows[1].record.config
        assert point.speedups == 1 and math.exp(point.log_speedup) == pytest.approx(row["sp"])
