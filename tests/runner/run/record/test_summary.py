"""runner/run/record/summary.py: the table a sweep prints when it ends, and what follows it."""

import random
import re

import pytest

from core.config import RunSettings
from core.host.machine import HostCapabilities
from core.schema import ResultLine, Status, VerificationCode
from models import get_suite
from child.trust import judge
from runner.plan.matrix import MatrixRequest, build_plan
from runner.run.record.summary import short_reason, sweep_summary, timings_cell

HOST = HostCapabilities(torch_version="2.9.0", dynamo_backends=("inductor", "aot_eager"),
                        packages={"torch": "2.9.0", "torch_xla": "2.9.0"})
#: Reasons as lines hold them (a slow period's is runner/run/record/slow_periods.py's wording).
SLOW = ("slow period: the reference (the host pulse during the timed runs) ran 1.50x this "
        "host's usual figure (bound 1.30x)")
CONTENTION = ("contention: other processes used 56% of the 2 core(s) this child was pinned to "
              "during the timed runs (bound 10%); load average 0.96")


def planned_sweep():
    request = MatrixRequest.of(accelerator=("cpu",), xla=(None, "PJRT"), dynamo=(None, "inductor"),
                               test=("eval", "train"), filters=("^mlp$", "^cnn$"))
    return build_plan(get_suite("builtin"), request, HOST)


def line_of(planned, times, summary=None, status=Status.OK, folder=None):
    """The line the runner writes for `planned`: a cold start of 2 s, then `times`."""
    line = ResultLine(planned.model, planned.experiment, RunSettings(repeat=len(times)),
                      status=status, verification_code=VerificationCode.VERIFIER_SKIPPED,
                      metrics={"per_iter_time": [2.0, *times], "total_time": [2.0, *times]},
                      summary={"cold_start_entries": 1, "cold_start_time": 2.0, **(summary or {})},
                      stack_label=planned.label, artifacts={"time": folder} if folder else {})
    return line.to_dict()


def table_rows(text):
    """The table's rows (header first), each a list of its cells (split on 2+ spaces)."""
    rows = []
    for row in text.splitlines():
        if not row.strip() or row.startswith(tuple("0123456789")) or ":" in row.split("  ")[0]:
            break
        rows.append(re.split(r"\s{2,}", row.strip()))
    return rows


def test_rows_follow_the_plan_whatever_order_the_lines_were_written_in(tmp_path):
    plan = planned_sweep()
    lines = [line_of(p, [0.01, 0.011, 0.012]) for p in plan.requested]
    printed = set()
    for seed in range(3):
        shuffled = random.Random(seed).sample(lines, len(lines))
        printed.add(sweep_summary(plan.requested, shuffled, [], tmp_path / "r.jsonl", tmp_path,
                                  RunSettings()))
    assert len(printed) == 1
    rows = table_rows(printed.pop())
    expected = [(p.model.model_name, p.label, p.experiment.test) for p in plan.requested]
    assert [(row[0], row[2], row[3]) for row in rows[1:]] == expected
    assert rows[1][:4] == ["mlp", "cpu", "eager", "eval"]


def test_speedup_is_the_paired_one_else_eager_line_over_this_one_and_cold_start_shows(tmp_path):
    plan = planned_sweep()
    by = {(p.model.model_name, p.label, p.experiment.test): p for p in plan.requested}
    eager = line_of(by["mlp", "eager", "eval"], [0.004, 0.004, 0.004])
    inductor = line_of(by["mlp", "inductor", "eval"], [0.002, 0.002, 0.002],
                       {"paired_speedup": {"method": "paired", "speedup": 1.5}})
    pjrt = line_of(by["mlp", "PJRT", "eval"], [0.008, 0.008, 0.008])
    text = sweep_summary(plan.requested, [eager, inductor, pjrt], [], tmp_path / "r.jsonl",
                         tmp_path, RunSettings())
    rows = {(row[0], row[2], row[3]): dict(zip(table_rows(text)[0], row))
            for row in table_rows(text)[1:]}
    # Paired (eager timed in the same child) wins over the two lines' ratio (2.00x).
    assert rows["mlp", "inductor", "eval"]["speedup"] == "1.50x"
    assert rows["mlp", "PJRT", "eval"]["speedup"] == "0.50x"
    assert rows["mlp", "eager", "eval"]["speedup"] == "-"
    assert rows["mlp", "eager", "eval"]["median/iter"] == "4 ms"
    assert rows["mlp", "inductor", "eval"]["cold start"] == "2 s"
    # Requested but not recorded (another runner's, or an interrupted sweep): said so.
    assert rows["cnn", "eager", "train"]["status"] == "not recorded"


def test_unreliable_lines_say_so_in_short_and_are_counted(tmp_path):
    plan = planned_sweep()
    varying = judge([0.010, 0.020, 0.010, 0.030], None)
    assert varying.unreliable
    flagged = {"unreliable": True, "unreliable_reasons": [*varying.reasons, CONTENTION, SLOW]}
    lines = [line_of(plan.requested[0], [0.01, 0.02, 0.01, 0.03], flagged),
             line_of(plan.requested[1], [0.01, 0.01, 0.01], {"unreliable": False})]
    text = sweep_summary(plan.requested[:2], lines, [], tmp_path / "r.jsonl", tmp_path,
                         RunSettings())
    rows = table_rows(text)
    assert rows[1][-1] == "unreliable: varies 55%, contention 56%, slow period 1.50x"
    assert rows[2][-1] == "ok"
    assert "1 of 2 timed experiment(s) are unreliable" in text
    assert "summary.unreliable_reasons" in text


@pytest.mark.parametrize("reason, short", [
    ("process 2: " + SLOW, "slow period 1.50x"),
    ("slow period: 88% of the timed runs followed a slow host pulse (over 0.775 ms, 1.25x this "
     "host's low pulse; bound 75%)", "slow period, 88% of runs slow"),
    ("contention through shared physical cores: other processes kept 40% of the 2 SMT "
     "sibling(s) of this child's cores busy during the timed runs (bound 10%)",
     "SMT siblings busy 40%"),
    ("a reason of a later version (with details)", "a reason of a later version"),
])
def test_short_reasons(reason, short):
    assert short_reason(reason) == short


def test_a_line_without_timings_has_no_reliability(tmp_path):
    plan = planned_sweep()
    failed = line_of(plan.requested[0], [], status=Status.FAILED)
    assert timings_cell(failed) == "-"


def test_a_resumed_sweep_shows_every_requested_row_and_which_were_read_back(tmp_path):
    plan = planned_sweep()
    recorded = [line_of(p, [0.01, 0.01, 0.01]) for p in plan.requested[:3]]
    new = [line_of(p, [0.01, 0.01, 0.01]) for p in plan.requested[3:]]
    path = tmp_path / "results.jsonl"
    text = sweep_summary(plan.requested, new, recorded + new, path, tmp_path, RunSettings())
    rows = table_rows(text)
    assert rows[0][-1] == "recorded" and len(rows) == 1 + len(plan.requested)
    assert [row[-1] for row in rows[1:]] == ["earlier"] * 3 + ["now"] * (len(new))
    assert f"{len(new)} experiment(s) recorded in {path}; 3 read back from earlier runs" in text
    # A fully resumed sweep (nothing new) still prints its table.
    resumed = sweep_summary(plan.requested, [], recorded + new, path, tmp_path, RunSettings())
    assert len(table_rows(resumed)) == 1 + len(plan.requested)
    assert f"0 experiment(s) recorded in {path}" in resumed
    assert f"experiment-runner report {path}" in resumed


def test_files_of_observability_flags_are_pointed_to(tmp_path):
    plan = planned_sweep()
    pjrt = next(p for p in plan.requested if p.label == "PJRT")
    folder = "builtin-mlp-cpu-PJRT-eval/run1/time"
    (tmp_path / folder / "hlo").mkdir(parents=True)
    (tmp_path / folder / "hlo" / "module_0001.txt").write_text("HloModule m")
    lines = [line_of(pjrt, [0.01, 0.01, 0.01], folder=folder),
             line_of(plan.requested[0], [0.01, 0.01, 0.01], folder="eager/run1/time")]
    settings = RunSettings(observe={"dump_hlo": True})
    text = sweep_summary([plan.requested[0], pjrt], lines, [], tmp_path / "r.jsonl", tmp_path,
                         settings)
    (pointer,) = [row for row in text.splitlines() if row.startswith("--dump-hlo")]
    assert "in 1 experiment folder(s)" in pointer and str(tmp_path / folder) in pointer
    # Not asked for: nothing said.
    quiet = sweep_summary([pjrt], lines[:1], [], tmp_path / "r.jsonl", tmp_path, RunSettings())
    assert "--dump-hlo" not in quiet
