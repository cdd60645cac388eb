"""Observability flags end to end: real sweeps in real children, files parsed."""

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

from core.schema import timed_values
from tests.conftest import CliRun, cli_command, cli_environment

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)

ALL_FLAGS = [
    "--collect-dynamo-counters", "--dump-dynamo-counters", "--profile-cuda-cpu",
    "--profile-cuda-cpu-individual-ops", "--dump-pytorch-profiles", "--dump-pytorch-xla-metrics",
    "--dump-hlo", "--save-ir-format=stablehlo",
]


#: The module's sweep less its stacks: children forked from a fork server.
# Cold compile caches (not the test run's shared one): the counters of a compile from zero.
TORCH_SWEEP = ["-k", "mlp", "--accelerator=cpu", "--xla=None", "--test=eval", "--repeat=2",
               "--warmup=1", "--compile-cache=None", *ALL_FLAGS]


@pytest.fixture(scope="module")
def torch_sweep(tmp_path_factory):
    """eager, aot_eager and inductor with every flag, into a relative output folder, each
    child forked from a fork server."""
    cwd = tmp_path_factory.mktemp("observe")
    command = cli_command(Path("output"), "--dynamo=None", "--dynamo=aot_eager",
                          "--dynamo=inductor", "--start-method=forkserver", *TORCH_SWEEP)
    completed = subprocess.run(command, capture_output=True, text=True, timeout=900,
                               env=cli_environment(), cwd=str(cwd))
    run = CliRun(completed.returncode, completed.stdout, completed.stderr, cwd / "output")
    assert completed.returncode == 0, completed.stderr
    lines = {line["experiment"]["dynamo"] or "eager": line for line in run.lines()}
    return run, lines


def folder(run, line) -> Path:
    """The timing child's own folder."""
    return run.output_dir / line["artifacts"]["time"]


def test_every_experiment_succeeds_in_its_own_folder(torch_sweep):
    run, lines = torch_sweep
    assert sorted(lines) == ["aot_eager", "eager", "inductor"]
    for line in lines.values():
        assert line["status"] == "ok", line["metrics"].get("error")
        assert folder(run, line).is_dir()
        assert folder(run, line).parents[2] == run.output_dir
        assert line["summary"]["peak_host_memory_bytes"] > 0


def test_profiler_metrics_come_from_runs_of_their_own(torch_sweep):
    _, lines = torch_sweep
    for line in lines.values():
        metrics = line["metrics"]
        assert len(metrics["total_cpu_time_s"]) == len(metrics["per_iter_cpu_time_s"]) == 2
        assert all(t > 0 for t in metrics["total_cpu_time_s"])
        assert "total_cuda_time_s" not in metrics  # CPU stacks
        assert len(timed_values(line, "total_time")) == 2  # profiled runs are not timed runs
        per_run = line["summary"]["inductor_ops"]  # PyTorch/XLA's name off XLA: aten ops
        assert len(per_run) == 2  # one dict per profiled run
        for ops in per_run:
            assert ops and all(name.startswith("aten::") for name in ops)
            assert all(row["num_of_calls"] >= 1 for row in ops.values())


def test_profiles_are_chrome_traces_and_tables_per_run(torch_sweep):
    run, lines = torch_sweep
    for line in lines.values():
        for index in range(2):
            directory = folder(run, line) / f"run-{index}"
            trace = json.loads((directory / "trace.json").read_text())
            events = trace["traceEvents"]
            assert events and all("ph" in event for event in events)
            assert any(event.get("name", "").startswith("aten::") for event in events)
            assert "Self CPU" in (directory / "profile.txt").read_text()
        assert not (folder(run, line) / "run-2").exists()


def test_dynamo_stacks_record_graphs_and_counters(torch_sweep):
    run, lines = torch_sweep
    for name in ("aot_eager", "inductor"):
        summary = lines[name]["summary"]
        assert summary["dynamo_graph_count"] == 1
        assert summary["dynamo_unique_graphs"] == 1
        assert summary["dynamo_graph_breaks"] == 0 and summary["dynamo_graph_break_reasons"] == {}
        # One entry per run, as PyTorch/XLA's runner: the warm-up's counters, then the runs'.
        warmup, *timed = summary["dynamo_counters"]
        assert warmup["stats"]["unique_graphs"] == 1 and len(timed) == 2
        assert all(run_counters.get("stats", {}).get("unique_graphs", 0) == 0
                   for run_counters in timed)
        assert summary["dynamo_compile_times_s"]
        for index in range(2):
            dumped = json.loads(
                (folder(run, lines[name]) / f"run-{index}" / "dynamo_counters.json").read_text())
            assert dumped["run"] == index
            assert dumped["counters"]["frames"]["ok"] >= 1
            assert dumped["changed_in_run"].get("stats", {}).get("unique_graphs", 0) == 0
    assert "inductor" in lines["inductor"]["summary"]["dynamo_counters"][0]
    assert "dynamo_graph_count" not in lines["eager"]["summary"]


def warmup_counters(line):
    """Dynamo's counters after the warm-up (compilation, cache misses and all)."""
    return line["summary"]["dynamo_counters"][0]


def test_forked_and_spawned_children_give_the_same_dynamo_counters(torch_sweep, tmp_path):
    """The sweep's inductor child, forked from a server (that forked the other stacks'
    children before it), against the same experiment in a spawned child."""
    _, lines = torch_sweep
    command = cli_command(tmp_path / "spawn", "--dynamo=inductor", "--start-method=spawn",
                          *TORCH_SWEEP)
    completed = subprocess.run(command, capture_output=True, text=True, timeout=900,
                               env=cli_environment(), cwd=str(tmp_path))
    assert completed.returncode == 0, completed.stderr
    (spawned,) = CliRun(0, "", "", tmp_path / "spawn").lines()
    assert spawned["status"] == "ok", spawned["metrics"].get("error")
    # The same compilation from zero: a fresh dynamo state, and a compile cache that misses.
    assert warmup_counters(lines["inductor"]) == warmup_counters(spawned)
    assert warmup_counters(spawned)["stats"]["unique_graphs"] >= 1


def test_flags_that_do_not_apply_say_so_once(torch_sweep):
    run, lines = torch_sweep
    eager_notes = lines["eager"]["notes"]
    for flag in ("--collect-dynamo-counters", "--dump-dynamo-counters",
                 "--dump-pytorch-xla-metrics", "--dump-hlo", "--save-ir-format=stablehlo"):
        assert sum(note.startswith(flag + " ") for note in eager_notes) == 1, flag
    inductor_notes = lines["inductor"]["notes"]
    assert not any("dynamo-counters" in note for note in inductor_notes)
    assert sum(note.startswith("--dump-hlo ") for note in inductor_notes) == 1
    assert run.stderr.count("--dump-hlo does not apply to the eager stack") == 1
    for line in lines.values():
        for missing in ("hlo", "ir"):
            assert not (folder(run, line) / missing).exists()
        assert not list(folder(run, line).glob("run-*/xla_metrics.txt"))
    assert not (folder(run, lines["eager"]) / "run-0" / "dynamo_counters.json").exists()


def test_a_rerun_writes_a_folder_of_its_own(torch_sweep, tmp_path):
    run, lines = torch_sweep
    output = tmp_path / "output"
    command = cli_command(output, "-k", "mlp", "--accelerator=cpu", "--xla=None",
                          "--dynamo=None", "--test=eval", "--repeat=1", "--warmup=0")
    first = subprocess.run(command, capture_output=True, text=True, timeout=300,
                           env=cli_environment())
    assert first.returncode == 0, first.stderr
    (old,) = CliRun(0, "", "", output).lines()
    stale = output / old["artifacts"]["time"] / "run-7"
    stale.mkdir()
    second = subprocess.run(command + ["--no-resume"], capture_output=True, text=True,
                            timeout=300, env=cli_environment())
    assert second.returncode == 0, second.stderr
    (new,) = CliRun(0, "", "", output).lines()
    assert new["experiment_id"] == old["experiment_id"] and new["run_id"] != old["run_id"]
    assert sorted(p.name for p in (output / new["artifacts"]["time"]).iterdir()) == [
        "child.log", "result.json", "spec.json"]
    assert stale.exists()  # an earlier run's files are left as they were


XLA_FLAGS_UNDER_TEST = [
    "--dump-hlo", "--save-ir-format=stablehlo", "--dump-pytorch-xla-metrics",
    "--profile-cuda-cpu", "--dump-pytorch-profiles", "--dump-dynamo-counters",
]


@pytest.fixture(scope="module")
def xla_sweep(tmp_path_factory):
    """PyTorch/XLA lazy, openxla and torchax with the XLA flags."""
    for package in ("torch_xla", "torchax", "jax"):
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"{package} is not installed")
    output = tmp_path_factory.mktemp("observe-xla") / "output"
    common = ["-k", "^mlp$", "--accelerator=cpu", "--test=eval", "--repeat=2", "--warmup=1",
              "--xla-flags=--xla_cpu_enable_fast_math=false", *XLA_FLAGS_UNDER_TEST]
    for stack in (["--xla=PJRT", "--dynamo=None", "--dynamo=openxla"],
                  ["--torch-xla2=extract_jax"]):
        completed = subprocess.run(cli_command(output, *stack, *common), capture_output=True,
                                   text=True, timeout=900, env=cli_environment())
        assert completed.returncode == 0, completed.stderr
    run = CliRun(0, "", "", output)
    lines = {}
    for line in run.lines():
        experiment = line["experiment"]
        lines["torchax" if experiment["torch_xla2"] else experiment["dynamo"] or "lazy"] = line
    return run, lines


def test_xla_stacks_succeed(xla_sweep):
    _, lines = xla_sweep
    assert sorted(lines) == ["lazy", "openxla", "torchax"]
    for line in lines.values():
        assert line["status"] == "ok", line["metrics"].get("error")


def test_hlo_dump_keeps_the_experiments_xla_flags(xla_sweep):
    run, lines = xla_sweep
    for line in lines.values():
        flags = line["environment"]["variables"]["XLA_FLAGS"]
        assert flags.startswith("--xla_cpu_enable_fast_math=false --xla_dump_to=")
        modules = list((folder(run, line) / "hlo").glob("*before_optimizations.txt"))
        assert modules, line["experiment"]
        assert all("HloModule" in path.read_text() for path in modules)


def test_stablehlo_holds_a_module(xla_sweep):
    run, lines = xla_sweep
    for line in lines.values():
        (path,) = (folder(run, line) / "ir").glob("graphs.stablehlo.txt*")
        text = path.read_text()
        assert "module @" in text and "stablehlo." in text and "func.func" in text


def test_torch_xla_stacks_dump_metrics_and_profiles_torchax_says_why_not(xla_sweep):
    run, lines = xla_sweep
    for name in ("lazy", "openxla"):
        line = lines[name]
        for index in range(2):
            directory = folder(run, line) / f"run-{index}"
            assert "Metric:" in (directory / "xla_metrics.txt").read_text()
            assert json.loads((directory / "trace.json").read_text())["traceEvents"]
        assert len(line["metrics"]["total_cpu_time_s"]) == 2
    assert (folder(run, lines["openxla"]) / "run-0" / "dynamo_counters.json").exists()
    assert lines["openxla"]["summary"]["dynamo_graph_count"] == 1
    torchax = lines["torchax"]
    assert not list(folder(run, torchax).glob("run-*"))
    assert "total_cpu_time_s" not in torchax["metrics"]
    flags = sorted(note.split()[0] for note in torchax["notes"])
    assert flags == ["--dump-dynamo-counters", "--dump-pytorch-profiles",
                     "--dump-pytorch-xla-metrics", "--profile-cuda-cpu"]
    assert [n.split()[0] for n in lines["lazy"]["notes"]] == ["--dump-dynamo-counters"]
