import math
import statistics

import pytest

from reports.analyse.aggregate import build_report
from reports.errors import ReportError
from reports.read.load import load
from tests.reports.conftest import craft_line

EAGER = {"mlp": [0.010, 0.012, 0.011], "cnn": [0.040, 0.044, 0.041], "transformer_block": [0.1, 0.09, 0.11]}
INDUCTOR = {"mlp": [0.005, 0.006, 0.007], "cnn": [0.030, 0.020, 0.025], "transformer_block": [0.12, 0.1, 0.11]}


def _by(report, stack):
    return {r.record.model: r for r in report.rows if r.record.config.stack == stack}


def _summary(report, stack):
    return next(s for s in report.summaries if s.config.stack == stack)


def test_speedup_and_geomean_against_eager(write_results):
    lines = [craft_line(m, "eager", times=t, peak_host=1000) for m, t in EAGER.items()]
    lines += [craft_line(m, "inductor", times=t, peak_host=800, cold_start=3.0) for m, t in INDUCTOR.items()]
    report = build_report(load([write_results(lines)]).records)
    rows = _by(report, "inductor")
    expected = {m: statistics.median(EAGER[m]) / statistics.median(INDUCTOR[m]) for m in EAGER}
    for model, value in expected.items():
        assert rows[model].speedup == pytest.approx(value)
        # On CPU the peak is the process's RSS: no compression ratio, and no warning about it.
        assert rows[model].compression_ratio is None
        assert not any("memory" in w for w in rows[model].warnings)
    summary = _summary(report, "inductor")
    assert summary.geomean_speedup == pytest.approx(math.prod(expected.values()) ** (1 / 3))
    assert summary.speedup_models == 3
    # Never verified: no pass rate, three unverified.
    assert summary.pass_rate is None and summary.unverified == 3
    assert summary.compression_ratio is None and summary.memory_note == "host RSS only: no ratio"
    mean_compile = statistics.fmean(3.0 - statistics.median(t) for t in INDUCTOR.values())
    assert summary.mean_compile_time == pytest.approx(mean_compile)
    assert _summary(report, "eager").geomean_speedup == pytest.approx(1.0)
    # transformer_block is slower under inductor: warned.
    assert any("speedup" in w for w in rows["transformer_block"].warnings)


def test_failures_and_missing_metrics_count_in_pass_rate_not_geomean(write_results):
    lines = [craft_line(m, "eager", times=t) for m, t in EAGER.items()]
    lines += [
        craft_line("mlp", "inductor", times=INDUCTOR["mlp"]),
        craft_line("cnn", "inductor", status="failed", code="VERIFIER_DIDNT_RUN", error="RuntimeError: compile failed"),
        craft_line("transformer_block", "inductor"),  # ok status but no timings
    ]
    report = build_report(load([write_results(lines)]).records)
    summary = _summary(report, "inductor")
    assert summary.models == 3 and summary.passed == 1
    # Nothing was verified: no pass rate, failure or not.
    assert (summary.judged, summary.accurate, summary.unverified) == (0, 0, 3)
    assert summary.pass_rate is None
    assert summary.speedup_models == 1
    assert summary.geomean_speedup == pytest.approx(statistics.median(EAGER["mlp"]) / statistics.median(INDUCTOR["mlp"]))
    assert any(w.startswith("failed: RuntimeError: compile failed") for w in _by(report, "inductor")["cnn"].warnings)
    assert "no per-iteration times" in _by(report, "inductor")["transformer_block"].warnings


def test_verification_failure_excluded_from_geomean_on_either_side(write_results):
    lines = [
        craft_line("mlp", "eager", times=EAGER["mlp"]),
        craft_line("cnn", "eager", times=EAGER["cnn"], code="FAIL"),
        craft_line("mlp", "inductor", times=INDUCTOR["mlp"], code="FAIL"),
        craft_line("cnn", "inductor", times=INDUCTOR["cnn"], code="PASS"),
    ]
    report = build_report(load([write_results(lines)]).records)
    summary = _summary(report, "inductor")
    assert summary.speedup_models == 0 and summary.geomean_speedup is None
    assert summary.passed == 1
    assert "verification FAIL" in _by(report, "inductor")["mlp"].warnings


def test_baseline_option_and_unknown_baseline(write_results):
    lines = [craft_line(m, "inductor", times=t) for m, t in INDUCTOR.items()]
    lines += [craft_line(m, "PJRT+openxla", times=[v * 2 for v in t]) for m, t in INDUCTOR.items()]
    records = load([write_results(lines)]).records
    report = build_report(records, "inductor")
    assert report.baseline == "inductor"
    assert _summary(report, "PJRT+openxla").geomean_speedup == pytest.approx(0.5)
    assert build_report(records, "pjrt+OPENXLA").baseline == "PJRT+openxla"
    with pytest.raises(ReportError, match="'inductr'.*inductor"):
        build_report(records, "inductr")
    # The default eager is absent: a note, not an error.
    default = build_report(records)
    assert default.notes and all(r.speedup is None for r in default.rows)


def test_baseline_matches_accelerator_test_precision_and_batch_size(write_results):
    lines = [
        craft_line("mlp", "eager", times=[1.0], test="eval", batch_size=8),
        craft_line("mlp", "eager", times=[4.0], test="train", batch_size=8),
        craft_line("mlp", "eager", times=[9.0], test="eval", batch_size=16),
        craft_line("mlp", "inductor", times=[0.5], test="eval", batch_size=8),
        craft_line("mlp", "inductor", times=[2.0], test="train", batch_size=8),
        craft_line("mlp", "inductor", times=[1.0], test="eval", precision="bf16", batch_size=8),
    ]
    report = build_report(load([write_results(lines)]).records)
    speedups = {(r.record.config.test, r.record.config.precision): r.speedup for r in report.rows if r.record.config.stack == "inductor"}
    assert speedups == {("eval", "fp32"): 2.0, ("train", "fp32"): 2.0, ("eval", "bf16"): None}


def test_warnings_for_compile_time_and_memory(write_results):
    lines = [
        craft_line("mlp", "eager", times=[1.0], peak_device=100, accelerator="cuda"),
        craft_line("mlp", "inductor", times=[1.0], cold_start=200.0, peak_device=200, accelerator="cuda"),
    ]
    row = _by(build_report(load([write_results(lines)]).records), "inductor")["mlp"]
    assert row.compression_ratio == pytest.approx(0.5)
    assert any(w.startswith("compile time") for w in row.warnings)
    assert any(w.startswith("memory compression") for w in row.warnings)
    assert not any(w.startswith("speedup") for w in row.warnings)


def test_pass_rate_counts_verified_experiments_only(write_results):
    lines = [craft_line(m, "eager", times=t, code="PASS") for m, t in EAGER.items()]
    lines += [
        craft_line("mlp", "inductor", times=INDUCTOR["mlp"], code="PASS"),
        craft_line("cnn", "inductor", times=INDUCTOR["cnn"], code="FAIL"),
        craft_line("transformer_block", "inductor", times=INDUCTOR["transformer_block"]),  # not verified
        craft_line("mlp", "PJRT", status="skipped"),
        craft_line("cnn", "inductor", status="failed", code="VERIFIER_DIDNT_RUN", error="boom", test="train"),
        craft_line("mlp", "inductor", times=[1.0], code="PASS", test="train"),
    ]
    report = build_report(load([write_results(lines)]).records)
    summary = _summary(report, "inductor")
    assert (summary.judged, summary.accurate, summary.unverified) == (2, 1, 1)
    assert summary.pass_rate == 0.5
    # Where something was verified, a failure to run counts against the pass rate.
    train = next(s for s in report.summaries if s.config.test == "train")
    assert (train.judged, train.accurate, train.pass_rate) == (2, 1, 0.5)
    assert _summary(report, "eager").pass_rate == 1.0
    skipped = _summary(report, "PJRT")
    assert skipped.pass_rate is None and skipped.skipped == 1 and skipped.unverified == 0


def test_device_memory_compression_and_the_paired_speedup(write_results):
    eager = craft_line("mlp", "eager", times=[1.0, 1.0], peak_device=1000, accelerator="cuda")
    paired = craft_line("mlp", "inductor", times=[0.5, 0.5], peak_device=500, accelerator="cuda", code="PASS")
    paired["summary"].update({"paired_speedup": {"method": "paired", "speedup": 1.9}, "eager_peak_device_memory_bytes": 1500})
    report = build_report(load([write_results([eager, paired])]).records)
    row = _by(report, "inductor")["mlp"]
    # The line's own interleaved eager runs win over the separate eager line.
    assert (row.speedup, row.speedup_method) == (1.9, "paired") and row.speedup_counts
    assert row.compression_ratio == pytest.approx(3.0)
    assert _summary(report, "inductor").compression_ratio == pytest.approx(3.0)


def test_paired_speedup_counts_without_an_eager_line(write_results):
    line = craft_line("mlp", "inductor", times=[0.5, 0.5])
    line["summary"] = {"paired_speedup": {"method": "paired", "speedup": 2.5}}
    report = build_report(load([write_results([line])]).records)
    assert _summary(report, "inductor").geomean_speedup == pytest.approx(2.5)


def test_a_model_of_several_batch_sizes_stays_in_one_configuration(write_results):
    lines = [craft_line("mlp", stack, times=[t], batch_size=bs)
             for bs, t in ((8, 1.0), (16, 2.0)) for stack in ("eager", "inductor")]
    report = build_report(load([write_results(lines)]).records)
    assert [s.config.label for s in report.summaries] == ["cpu eager eval fp32", "cpu inductor eval fp32"]
    assert sorted(r.record.batch_size for r in report.rows if r.record.config.stack == "inductor") == [8, 16]
