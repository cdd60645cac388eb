"""Every deliberate failure model, in real children, through the real CLI."""

import re
from pathlib import Path

import psutil
import pytest

from core.config import ExperimentConfig, ModelConfig, RunSettings
from core.contract import Role
from runner.run.executor import ExecutorOptions, ExperimentExecutor, SweepInfo
from runner.plan.matrix import PlannedExperiment
from runner.plan.slots import Slot
from runner.run.process.scratch import ScratchRoot
from runner.run.process.supervision import ExperimentCancelled

SWEEP = SweepInfo(run_id="sweep-1")
EAGER = ExperimentConfig("cpu", None, None, None, "eval", stack="eager")
FAULTS = ["raises", "segfault", "exit", "signal", "hang", "memory_hog", "gpu_oom"]


@pytest.fixture(scope="module")
def fault_sweep(tmp_path_factory):
    from tests.conftest import CliRun, cli_command, cli_environment
    import subprocess

    output = tmp_path_factory.mktemp("faults") / "output"
    command = cli_command(
        output, "--suite-name=faults", "--accelerator=cpu", "--xla=None", "--dynamo=None",
        "--test=eval", "--repeat=1", "--warmup=1", "--subprocess-timeout=15",
        "--memory-limit-mb=1200",
    )
    completed = subprocess.run(command, capture_output=True, text=True, timeout=600,
                               env=cli_environment())
    run = CliRun(completed.returncode, completed.stdout, completed.stderr, output)
    return run, {line["model"]["model_name"]: line for line in run.lines()}


@pytest.mark.e2e
@pytest.mark.waits
def test_every_fault_gives_exactly_one_failed_line_and_the_sweep_goes_on(fault_sweep):
    run, lines = fault_sweep
    assert run.returncode == 0, run.stderr
    assert len(run.lines()) == len(FAULTS)
    assert sorted(lines) == sorted(FAULTS)
    for line in lines.values():
        assert line["status"] == "failed"
        assert line["verification_code"] == "VERIFIER_DIDNT_RUN"
        assert 0 < len(line["metrics"]["error"]) <= 4000


@pytest.mark.e2e
@pytest.mark.parametrize("model, expected", [
    ("raises", r"raised RuntimeError: the raises model fails on purpose"),
    ("segfault", r"killed by SIGSEGV \(segmentation fault\)"),
    ("exit", r"exited with status 3 without a result"),
    ("signal", r"killed by SIGTERM"),
    ("hang", r"past the timeout of 15 s; its whole process tree was killed"),
    ("memory_hog", r"over the memory limit of 1200 MiB"),
    ("gpu_oom", r"raised OutOfMemoryError: CUDA out of memory"),
])
def test_the_error_says_what_happened(fault_sweep, model, expected):
    _, lines = fault_sweep
    assert re.search(expected, lines[model]["metrics"]["error"]), lines[model]["metrics"]["error"]


@pytest.mark.e2e
def test_the_error_carries_the_tail_of_the_childs_output(fault_sweep):
    _, lines = fault_sweep
    assert "last output of the child" in lines["hang"]["metrics"]["error"]
    assert "fault-model grandchild pid" in lines["hang"]["metrics"]["error"]
    assert "traceback" in lines["raises"]["metrics"]["error"]


@pytest.mark.e2e
def test_the_hung_childs_grandchild_is_killed_too(fault_sweep):
    run, lines = fault_sweep
    log = (run.output_dir / lines["hang"]["artifacts"]["time"] / "child.log").read_text()
    pid = int(re.search(r"fault-model grandchild pid (\d+)", log).group(1))
    alive = psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    assert not alive


@pytest.mark.parametrize("model_name", [
    "../../escape", "/etc/passwd", "..", ".", "a/../../b", "~root", "x\x00y", "C:\\evil",
])
def test_a_model_name_cannot_escape_the_output_folder(tmp_path, model_name):
    output = tmp_path / "output"
    executor = ExperimentExecutor(ExecutorOptions(output_dir=output), RunSettings(), SWEEP)
    planned = PlannedExperiment(ModelConfig("builtin", model_name), EAGER, "eager")
    directory = executor.child_folder(planned, Role.TIME)
    assert directory.is_absolute()
    assert directory.parent.parent.parent == output.resolve()
    experiment_folder = directory.parent.parent.name
    assert experiment_folder not in (".", "..") and "/" not in experiment_folder


def test_a_relative_output_folder_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    executor = ExperimentExecutor(ExecutorOptions(output_dir=Path("output")), RunSettings(), SWEEP)
    planned = PlannedExperiment(ModelConfig("builtin", "mlp"), EAGER, "eager")
    assert executor.child_folder(planned, Role.VERIFY) == (
        tmp_path.resolve() / "output" / planned.experiment_id / "sweep-1" / "verify")


def test_cuda_children_take_turns_through_their_gpus_gate_shared_by_every_runner(
        tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1a/2b,7")
    executor = ExperimentExecutor(ExecutorOptions(output_dir=tmp_path), RunSettings(), SWEEP)
    other = ExperimentExecutor(ExecutorOptions(output_dir=tmp_path / "other"), RunSettings(), SWEEP)
    cuda = PlannedExperiment(ModelConfig("builtin", "mlp"),
                             ExperimentConfig("cuda", None, "inductor", None, "eval",
                                              stack="dynamo"), "inductor")
    on_slot = executor.device_gate(cuda, Slot(1, (2, 3), "7", shares_device=True))
    assert on_slot == other.device_gate(cuda, Slot(0, (0,), "7"))  # another runner, same GPU
    assert Path(on_slot).name == "gpu-7.gate"
    assert Path(on_slot).parent.stat().st_mode & 0o777 == 0o700
    # Without a slot of its own, the child's device is the runner's first visible GPU.
    assert Path(executor.device_gate(cuda, None)).name == "gpu-GPU-1a_2b.gate"
    cpu = PlannedExperiment(ModelConfig("builtin", "mlp"), EAGER, "eager")
    assert executor.device_gate(cpu, Slot(0, (0,), "7")) is None


def test_the_child_environment_holds_no_runner_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPERIMENT_RUNNER_SMALL_MODELS", "1")
    monkeypatch.setenv("EXPERIMENT_RUNNER_DEBUG_STACKS", "1")
    # torch_xla, once imported by an in-process test of the same worker, leaves its own
    # XLA_FLAGS in os.environ; the user's flags are not what this test is about.
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    settings = RunSettings(observe={"dump_hlo": True})
    executor = ExperimentExecutor(ExecutorOptions(output_dir=tmp_path), settings, SWEEP)
    lazy = PlannedExperiment(ModelConfig("builtin", "mlp"),
                             ExperimentConfig("cpu", "PJRT", None, None, "eval", stack="xla_lazy"),
                             "PJRT")
    timing = executor.child_environment(lazy, Role.TIME, tmp_path / "t", tmp_path)
    verifying = executor.child_environment(lazy, Role.VERIFY, tmp_path / "v", tmp_path)
    for environment in (timing, verifying):
        assert not [name for name in environment if name.startswith("EXPERIMENT_RUNNER_")]
        assert environment["PJRT_DEVICE"] == "CPU"
    # Only the timing child dumps HLO, into its own folder.
    assert timing["XLA_FLAGS"] == f"--xla_dump_to={(tmp_path / 't').resolve() / 'hlo'}"
    assert "XLA_FLAGS" not in verifying


def test_children_get_the_probes_variables_unless_the_user_set_them(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_VEC_ISA_OK", raising=False)
    options = ExecutorOptions(output_dir=tmp_path, host_variables=(("TORCHINDUCTOR_VEC_ISA_OK", "1"),))
    executor = ExperimentExecutor(options, RunSettings(), SWEEP)
    planned = PlannedExperiment(ModelConfig("builtin", "mlp"), EAGER, "eager")
    assert executor.child_environment(planned, Role.TIME, tmp_path / "t", tmp_path)[
        "TORCHINDUCTOR_VEC_ISA_OK"] == "1"
    monkeypatch.setenv("TORCHINDUCTOR_VEC_ISA_OK", "0")
    assert executor.child_environment(planned, Role.TIME, tmp_path / "t", tmp_path)[
        "TORCHINDUCTOR_VEC_ISA_OK"] == "0"


def test_a_childs_server_preloads_its_stack_then_its_suites_libraries():
    import importlib.util

    from backends import get_stack
    from runner.run.executor import server_preload

    inductor = ExperimentConfig("cpu", None, "inductor", None, "eval", stack="dynamo")
    compiler = get_stack("dynamo").preload
    hf = PlannedExperiment(ModelConfig("huggingface", "BertForMaskedLM"), EAGER, "eager")
    timm = PlannedExperiment(ModelConfig("timm", "mobilenetv2_100"), inductor, "inductor")
    builtin = PlannedExperiment(ModelConfig("builtin", "mlp"), EAGER, "eager")
    eager = get_stack("eager").preload
    assert server_preload(hf, frozenset({eager})) == (*eager, "transformers.modeling_utils")
    # Beside a compiled experiment, eager's children start from the compiler's server, with
    # their suite's libraries after it; the suite adds nothing that is already there.
    assert server_preload(hf, frozenset({eager, compiler})) == (
        *compiler, "transformers.modeling_utils")
    assert server_preload(timm, frozenset({compiler})) == (*compiler, "timm")
    # A builder suite's models come from its builder module, which the server imports too.
    assert server_preload(builtin, frozenset({eager})) == (*eager, "models.builders.builtin")
    assert importlib.util.find_spec("models.builders.builtin") is not None
    # The suites' preloads name modules that exist here (a renamed one would stop the server).
    assert importlib.util.find_spec("transformers.modeling_utils") is not None
    assert importlib.util.find_spec("timm") is not None


class MeasuredThenTrouble(ExperimentExecutor):
    """An executor whose timing child measured, and whose side files or verification then
    fail: the trouble must end in the line, never cost it (issue 43)."""

    def __init__(self, tmp_path, settings, trouble):
        super().__init__(ExecutorOptions(output_dir=tmp_path), settings, SWEEP)
        self.trouble = trouble

    def time_processes(self, planned, count, slot=None, attempt=1, lender=None):
        from core.contract import ChildResult
        from core.schema import Status
        from runner.run.process.supervision import ChildOutcome

        folder = self.child_folder(planned, Role.TIME, 1, attempt)
        folder.mkdir(parents=True)
        result = ChildResult(status=Status.OK, metrics={"per_iter_time": [0.1, 0.1]},
                             summary={"reference": {"before": {"launch_us": 4.0, "device": "cpu"}}})
        outcome = ChildOutcome(folder, returncode=0, result=result)
        return outcome, [outcome]

    def run_child(self, planned, role, *args, **kwargs):
        raise self.trouble


@pytest.mark.parametrize("trouble", [OSError(28, "No space left on device", "spec.json"),
                                     ExperimentCancelled("the sweep was stopped")])
def test_a_verification_that_cannot_start_leaves_the_measured_line(tmp_path, trouble):
    executor = MeasuredThenTrouble(tmp_path, RunSettings(verify=True), trouble)
    executor.references.folder = tmp_path / "reference"
    line = executor.run(PlannedExperiment(ModelConfig("builtin", "mlp"), EAGER, "eager"))
    assert line.metrics["per_iter_time"] == [0.1, 0.1]
    assert line.verification_code.value == "VERIFIER_DIDNT_RUN"
    assert "the verification did not start" in line.verification_reason


def test_a_history_that_cannot_be_judged_is_a_note_in_the_line(tmp_path, monkeypatch):
    executor = MeasuredThenTrouble(tmp_path, RunSettings(), OSError())

    def broken(*args):
        raise RuntimeError("an unexpected shape")

    monkeypatch.setattr(executor.references, "judge_summary", broken)
    line = executor.run(PlannedExperiment(ModelConfig("builtin", "mlp"), EAGER, "eager"))
    assert line.status.value == "ok" and line.metrics["per_iter_time"] == [0.1, 0.1]
    assert line.notes == ["not judged for slow periods: RuntimeError: an unexpected shape"]


class MeasuredOnACard(MeasuredThenTrouble):
    """The same measured child, whose card was busy 45 ms of its 100 ms iterations."""

    def time_processes(self, planned, count, slot=None, attempt=1, lender=None):
        outcome, outcomes = super().time_processes(planned, count, slot, attempt, lender)
        outcome.result.summary.update(device_busy_ms=45.0, host_bound=False,
                                      host_bound_fraction=0.0)
        return outcome, outcomes


def test_a_line_whose_card_idles_for_half_of_each_iteration_is_host_bound(tmp_path):
    executor = MeasuredOnACard(tmp_path, RunSettings(), OSError())
    executor.references.folder = tmp_path / "reference"
    line = executor.run(PlannedExperiment(ModelConfig("builtin", "mlp"), EAGER, "eager"))
    assert line.summary["host_share"] == pytest.approx(0.55)
    assert line.summary["host_bound"] and line.summary["host_bound_by"] == "host share"


def test_children_and_fork_servers_keep_temporary_files_in_the_scratch_root(tmp_path):
    # torch makes a temporary folder at import; a fork server killed with its runner left
    # it in TMPDIR. In the scratch root, the guard (or the next runner) removes it.
    executor = ExperimentExecutor(ExecutorOptions(output_dir=tmp_path / "output"), RunSettings(),
                                  SWEEP, scratch=ScratchRoot(tmp_path))
    planned = PlannedExperiment(ModelConfig("builtin", "mlp"), EAGER, "eager")
    first, second = executor.scratch.new_folder(), executor.scratch.new_folder()
    environments = [executor.child_environment(planned, Role.TIME, tmp_path / "child", scratch)
                    for scratch in (first, second)]
    assert {env["TMPDIR"] for env in environments} == {str(executor.scratch.path)}
    executor.scratch.remove()
