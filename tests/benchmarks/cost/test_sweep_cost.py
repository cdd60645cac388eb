"""benchmarks/cost/sweep_cost.py: a case's parts, read from a real sweep's clock readings."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from benchmarks.cost.sweep_cost import PARTS, attribute, case_of, main
from benchmarks.table_inputs import open_run, unpack
from core.files.results_file import read_results
from tests.conftest import cli_environment

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.e2e
def test_the_parts_of_each_case_add_up_to_the_sweep(tmp_path, capsys):
    out = tmp_path / "out"
    start = time.time()
    subprocess.run([sys.executable, str(ROOT / "experiment_runner.py"), "--accelerator=cpu",
                    "--xla=None", "--dynamo=None", "-k", "^(mlp|cnn)$", "--test=eval",
                    "--repeat=2", "--warmup=1", "--processes=2", "--no-progress",
                    f"--output-dirname={out}"], check=True, capture_output=True, timeout=600,
                   env=cli_environment())  # the other tests' runners': their templates serve it
    end = time.time()
    lines = read_results(out / "results.jsonl").lines
    cases = [case_of(line) for line in lines]
    assert len(cases) == 2 and all(cases)
    attribute(cases, start, end)
    for case in cases:
        assert set(case.parts) == set(PARTS) and all(v >= 0 for v in case.parts.values())
        assert case.parts["timing"] > 0 and case.parts["reference"] > 0
        assert case.parts["child"] > 0 and case.parts["build"] > 0
    # Every second of the runner's is some case's part (the clocks differ by milliseconds).
    assert sum(case.wall for case in cases) == pytest.approx(end - start, abs=0.5)
    assert main(["parts", str(out / "results.jsonl")]) == 0
    table = capsys.readouterr().out
    assert "builtin mlp eager eval fp32" in table and "| all cases |" in table


def test_a_line_without_clock_readings_is_no_case():
    assert case_of(json.loads('{"model": {"model_name": "m"}, "summary": {}}')) is None


def test_lanes_that_share_a_gpu_count_each_case_at_its_share_and_the_whole_run(tmp_path, capsys):
    """fidelity.sh's PER_GPU lanes: real lines of a 4-H200 run (3 lanes on each of 2 GPUs,
    an invocation per case); a case's parts count over the lanes per GPU, each invocation's
    start goes to its own case only, and the report adds both tools' whole runs."""
    from benchmarks.cost.sweep_cost import gpu_report

    table = ROOT / "benchmarks" / "tables" / "2026-11-28-h200x4-lanes-cost" / "cost2"
    out = tmp_path / "out"
    unpack(open_run(table), out)
    lanes = (out / "ours-lanes.wall").read_text()
    (out / "ours-lanes.wall").unlink()
    assert gpu_report([out]) == 0
    alone = capsys.readouterr().out
    (out / "ours-lanes.wall").write_text(lanes)
    assert gpu_report([out]) == 0
    shared = capsys.readouterr().out

    def ours_seconds(text: str) -> dict[str, float]:
        rows = [line.split("|") for line in text.splitlines() if line.startswith("| huggingface-")
                or line.startswith("| timm-")]
        return {row[1].strip(): float(row[2]) for row in rows}

    before, after = ours_seconds(alone), ours_seconds(shared)
    assert len(before) == 12 and before.keys() == after.keys()
    for name, seconds in before.items():
        assert after[name] == pytest.approx(seconds * 2 / 6, abs=0.02)
    start, end, gpus, count = lanes.split()
    harness = (out / "peer-streams.wall").read_text().split()
    assert (f"whole run: ours held {gpus} GPU(s) for {float(end) - float(start):.0f} s "
            f"({int(count) // int(gpus)} lanes or slots a GPU)") in shared
    assert f"the harness held {harness[2]} for {float(harness[1]) - float(harness[0]):.0f} s" in shared
    # An invocation's start and end are its own case's, all of them and nothing else: no
    # case's "writing the line" runs on to the next case another lane started.
    spans = {path.stem.removeprefix("ours-case-"): path.read_text().split()
             for path in out.glob("ours-case-*.wall")}
    assert spans.keys() == before.keys()
    for name, (start, end, *_) in spans.items():
        assert before[name] == pytest.approx(float(end) - float(start), abs=0.02), name
    # `parts` with the same folder's walls gives each invocation's start to its own case.
    assert main(["parts", str(out / "ours" / "results.jsonl"), "--runner-wall", str(out)]) == 0
    rows = [line.split("|") for line in capsys.readouterr().out.splitlines()
            if line.startswith("| huggingface") or line.startswith("| timm")]
    assert len(rows) == 12 and all(float(row[3]) > 0 for row in rows)


def test_slots_sharing_a_gpu_in_one_invocation_count_each_case_at_its_share(tmp_path, capsys):
    """Real lines of a 2-H200 run: one invocation per list, 3 experiments sharing ours' GPU
    (--experiments-per-gpu=auto); each case counts over its GPU's 3 slots, and the report
    gives both tools' whole runs."""
    from benchmarks.cost.sweep_cost import gpu_report

    out = tmp_path / "out"
    unpack(open_run(ROOT / "benchmarks" / "tables" / "2026-11-29-h200x2-sweep-cost" / "b"), out)
    lines = read_results(out / "ours" / "results.jsonl").lines
    slots = {tuple(line["environment"]["torch_settings"]["cpu_affinity"]) for line in lines}
    assert len(slots) == 3 and {line["environment"]["variables"]["CUDA_VISIBLE_DEVICES"]
                                for line in lines} == {"1"}
    assert gpu_report([out]) == 0
    shared = capsys.readouterr().out
    whole = {}
    for line in lines:
        case = case_of(line)
        whole[case.key] = case.wall
    rows = {row[1].strip(): float(row[2]) for row in
            (text.split("|") for text in shared.splitlines() if text.startswith("| "))
            if row[1].strip().startswith(("huggingface-", "timm-"))}
    assert rows.keys() == whole.keys()
    spans = [(out / name).read_text().split() for name in (
        "ours-huggingface-bsdefault-amp-default-eval+train.wall",
        "ours-timm-bsdefault-amp-default-eval+train.wall")]
    held = sum(float(end) - float(start) for start, end, _ in spans)
    # Its own parts over its invocation's slots (3 for the 4 Hugging Face cases, 2 for the
    # 2 timm ones), plus its share of the invocation's start and end.
    for key, seconds in rows.items():
        assert seconds >= whole[key] / (3 if key.startswith("huggingface-") else 2) - 0.02
    # Every GPU-second of the invocations is some case's, the start's of all 3 slots too.
    assert sum(rows.values()) == pytest.approx(held, abs=1.0)
    assert f"whole run: ours held 1 GPU(s) for {held:.0f} s (3 lanes or slots a GPU)" in shared


def test_a_later_process_on_a_lent_slot_counts_on_that_slot(capsys):
    """Real lines of a one-H200 sweep (seed 1203) where idle slots ran later processes of the
    last experiments (summary.processes.slots): each child counts on the slot it ran on, so
    the case that ran last on a slot before it was lent is charged up to the lent process's
    start, not for that process, and the cases together hold the GPU for the whole run."""
    from benchmarks.cost.sweep_cost import gpu_report

    out = ROOT / "benchmarks" / "tables" / "2026-11-29-h200-sweep-seed1203"
    run = open_run(out)
    lines = {case_of(line).key: (line, case_of(line)) for line in run.lines()}
    line, case = lines["huggingface-XLNetLMHeadModel-bs16-amp-default-train"]
    slots = line["summary"]["processes"]["slots"]
    assert slots == [1, 2, 1]  # its second process ran on slot 2, lent to it
    assert [place for place, _, _ in case.children] == [f"0|slot {index}" for index in slots]
    lent_at = case.children[1][1]
    _, owner = lines["huggingface-XLNetLMHeadModel-bs16-amp-default-eval"]
    assert {place for place, _, _ in owner.children} == {"0|slot 2"}
    owner_end = max(end for _, _, end in owner.children)
    assert gpu_report([out]) == 0
    report = capsys.readouterr().out
    header = [cell.strip() for cell in report.splitlines()[0].split("|")]
    rows = {row[1].strip(): row for row in
            (text.split("|") for text in report.splitlines() if text.startswith("| hugging")
             or text.startswith("| timm-"))}
    assert len(rows) == 8
    # The slot's owner: the moment between its last child and the lent process there (the
    # GPU's 3 slots share it), not the lent process's 37 s.
    owner_row = rows["huggingface-XLNetLMHeadModel-bs16-amp-default-eval"]
    assert float(owner_row[header.index("writing the line")]) == pytest.approx(
        (lent_at - owner_end) / 3, abs=0.5)
    held = float(re.search(r"whole run: ours held 1 GPU\(s\) for (\d+) s", report).group(1))
    assert sum(float(row[2]) for row in rows.values()) == pytest.approx(held, abs=1.0)


def test_later_processes_that_ran_at_once_count_once_for_the_gpu(capsys):
    """Real lines of a one-H200 run whose later two processes ran at once
    (summary.processes.later_at_once): each case holds the GPU for its invocation's wall, not
    for the sum of its processes' walls."""
    from benchmarks.cost.sweep_cost import gpu_report

    out = ROOT / "benchmarks" / "tables" / "2026-12-02-h200-seed6202"
    run = open_run(out)
    for line in run.lines():
        case = case_of(line)
        processes = line["summary"]["processes"]
        assert processes["later_at_once"][0] is None and all(processes["later_at_once"][1:])
        summed = sum(processes["wall_seconds"])
        spans = [(start, end) for _, start, end in case.children]
        union = max(end for _, end in spans) - min(start for start, _ in spans)
        assert case.wall == pytest.approx(union, rel=0.02) and case.wall < summed - 10
    assert gpu_report([out]) == 0
    report = capsys.readouterr().out
    for text in report.splitlines():
        if text.startswith("| timm-") or text.startswith("| huggingface-"):
            name, ours = text.split("|")[1].strip(), float(text.split("|")[2])
            start, end = run.walls[f"ours-case-{name}"].split()[:2]
            assert ours == pytest.approx(float(end) - float(start), abs=6.0)


def test_a_case_the_harness_failed_is_not_compared(tmp_path, capsys):
    """The harness writes a row of zeros for a model it could not load or run: the case keeps
    our wall but counts in no ratio, and the report names it."""
    from benchmarks.cost.sweep_cost import gpu_report

    out = tmp_path / "out"
    unpack(open_run(ROOT / "benchmarks" / "tables" / "2026-12-02-h200-seed6407" / "call1"), out)
    assert gpu_report([out]) == 0
    before = capsys.readouterr().out
    csv = out / "peer-timm-vit_base_patch14_dinov2-bs1-fp16-default-eval.csv"
    header = csv.read_text().splitlines()[0]
    csv.write_text(header + "\n" + ",".join(
        {"dev": "cuda", "name": "vit_base_patch14_dinov2"}.get(column, "0")
        for column in header.split(",")) + "\n")
    assert gpu_report([out]) == 0
    after = capsys.readouterr().out
    assert "measured nothing on timm-vit_base_patch14_dinov2-bs1-fp16-default-eval" in after
    count = int(before.split(" cases run by both")[0].rsplit("\n", 1)[1])
    assert f"\n{count - 1} cases run by both" in after
    row = next(line for line in after.splitlines() if line.startswith("| timm-vit_base"))
    assert row.split("|")[3].strip() == "-"


#: A stand-in for fidelity.sh (which needs a GPU): it notes which tool ran which case, in
#: order, and sleeps where the case's model says so; SLOW's tool outlives any budget.
FAKE_FIDELITY = r'''
read -r suite model rest < "$3"
echo "$model $TOOLS $HARNESS_RUNS $PER_CASE" >> "$(dirname "$2")/order.txt"
case "$model" in SLOW) sleep 30 & echo $! > "$2/sleeper.pid"; wait ;; esac
exit 0
'''


@pytest.mark.e2e
def test_per_case_takes_the_tools_in_turn_and_goes_on_where_a_budget_cut_it(tmp_path):
    from benchmarks.cost.sweep_cost import CASE_DONE, per_case

    script = tmp_path / "fidelity.sh"
    script.write_text(FAKE_FIDELITY)
    cases = tmp_path / "cases.txt"
    cases.write_text("# suite model batch precision mode test\n"
                     "timm A 8 amp default eval\n\nhuggingface B 1 fp16 cudagraphs train\n"
                     "timm SLOW 4 bf16 default eval\ntimm D 2 fp32 default eval\n")
    out = tmp_path / "out"
    started = time.monotonic()
    done = per_case(tmp_path, out, cases, budget=3, case_at_least=0.5, script=script)
    assert time.monotonic() - started < 20  # SLOW's tool stopped at the budget, whole group
    assert done == [out / "case0", out / "case1"]
    order = (out / "order.txt").read_text().splitlines()
    assert order == ["A harness 1 1", "A ours 1 1", "B ours 1 1", "B harness 1 1",
                     "SLOW harness 1 1"]
    assert not (out / "case2" / CASE_DONE).exists()
    assert (out / "case1" / "case.txt").read_text() == "huggingface B 1 fp16 cudagraphs train\n"
    sleeper = int((out / "case2" / "sleeper.pid").read_text())
    assert not psutil.pid_exists(sleeper) or psutil.Process(sleeper).status() == "zombie"
    # Again: the done cases stay, the cut one runs again whole; no case starts with too little left.
    (out / "order.txt").unlink()
    cases.write_text(cases.read_text().replace("SLOW", "C"))
    done = per_case(tmp_path, out, cases, budget=60, case_at_least=0.5, script=script)
    assert done == [out / f"case{index}" for index in range(4)]
    assert (out / "order.txt").read_text().splitlines() == [
        "C harness 1 1", "C ours 1 1", "D ours 1 1", "D harness 1 1"]
    assert not (out / "case2" / "sleeper.pid").exists()
    assert per_case(tmp_path, out / "other", cases, budget=0.1, case_at_least=1,
                    script=script) == []


@pytest.mark.e2e
def test_ctrl_c_in_per_case_stops_the_tool_it_runs(tmp_path):
    script = tmp_path / "fidelity.sh"
    script.write_text(FAKE_FIDELITY)
    cases = tmp_path / "cases.txt"
    cases.write_text("timm SLOW 4 bf16 default eval\n")
    out = tmp_path / "out"
    code = ("import sys\nfrom pathlib import Path\n"
            "from benchmarks.cost.sweep_cost import per_case\n"
            f"per_case(Path({str(tmp_path)!r}), Path({str(out)!r}), Path({str(cases)!r}), "
            f"budget=120, case_at_least=1, script=Path({str(script)!r}))\n")
    runner = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=cli_environment(),
                              stderr=subprocess.PIPE, text=True)
    pid_file = out / "case0" / "sleeper.pid"
    deadline = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    sleeper = int(pid_file.read_text())
    runner.send_signal(signal.SIGINT)
    _, err = runner.communicate(timeout=60)
    assert runner.returncode != 0 and "KeyboardInterrupt" in err
    assert not psutil.pid_exists(sleeper) or psutil.Process(sleeper).status() == "zombie"
