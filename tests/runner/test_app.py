"""runner/app.py's main: a stop that lands while the command line is still being read."""

import pytest

from runner import app
from runner.run.process import signals


@pytest.mark.parametrize("stop, status", [(KeyboardInterrupt(), 130),
                                          (signals.Terminated(15), 143)])
def test_a_stop_while_parsing_exits_with_the_signals_status(monkeypatch, capsys, stop, status):
    """Parsing imports lazily, so Ctrl-C or SIGTERM can land there: the runner says so and
    exits 128 + the signal, as at any later moment, with no traceback."""
    def interrupted_parser():
        raise stop

    monkeypatch.setattr(app.signals, "install", lambda: None)
    monkeypatch.setattr(app, "build_parser", interrupted_parser)
    assert app.main(["--accelerator=cpu"]) == status
    stderr = capsys.readouterr().err
    assert "experiment-runner: " in stderr and signals.signal_name(stop) in stderr
    assert "Traceback" not in stderr


# What a user reads: refusals, listings and the log of a plan (the probe replaced by a fixed
# answer; torch 2.9's registered dynamo backends, its test-only and minifier ones included).

import logging  # noqa: E402

from core.host.machine import HostCapabilities  # noqa: E402

TORCH_BACKENDS = (
    "aot_eager", "aot_eager_decomp_partition", "aot_eager_decomp_partition_crossref",
    "aot_eager_decomp_partition_with_mode", "aot_eager_default_partitioner", "aot_ts",
    "cudagraphs", "dynamo_accuracy_minifier_backend", "dynamo_minifier_backend", "eager",
    "eager_debug", "eager_noexcept", "inductor", "non_leaf_compile_error_TESTING_ONLY",
    "openxla", "openxla_eval", "pre_dispatch_eager", "relu_accuracy_error_TESTING_ONLY",
    "relu_compile_error_TESTING_ONLY", "relu_runtime_error_TESTING_ONLY", "ts", "tvm")
CPU_BOX = HostCapabilities(python="3.11", torch_version="2.9.0+cu128", cuda_available=False,
                           dynamo_backends=TORCH_BACKENDS,
                           packages={"torch": "2.9.0", "torch_xla": "2.9.0"})


@pytest.fixture
def cli_on_a_cpu_box(monkeypatch, tmp_path):
    """app.main in-process on a CPU-only host, in tmp_path; returns (status, out, err)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(app, "probe_host", lambda use_cache=True, with_compiler_checks=True, while_probing=None: CPU_BOX)
    monkeypatch.setattr(app.signals, "install", lambda: None)

    def run(*argv, capsys):
        code = app.main(list(argv))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def test_a_misspelt_backend_gets_the_close_name_and_only_backends_a_user_picks(
        cli_on_a_cpu_box, capsys, tmp_path):
    code, _, err = cli_on_a_cpu_box("--accelerator=cpu", "-k", "^mlp$", "--dynamo=inducter",
                                    "--output-dirname=out", capsys=capsys)
    assert code == 2
    (message,) = err.strip().splitlines()
    assert message.startswith("experiment-runner: error: no requested combination can run "
                              "here: dynamo backend 'inducter' is not registered in torch "
                              "2.9.0+cu128; did you mean 'inductor'? backends: aot_eager, ")
    assert "TESTING_ONLY" not in message and "minifier" not in message
    assert "XLA device" not in message  # the PJRT combination nobody named
    assert not (tmp_path / "out").exists()


def test_cuda_on_a_cpu_box_says_first_that_there_is_no_cuda_device(
        cli_on_a_cpu_box, capsys, tmp_path):
    code, _, err = cli_on_a_cpu_box("--accelerator=cuda", "-k", "^mlp$",
                                    "--output-dirname=out/deeper", capsys=capsys)
    assert code == 2
    (message,) = err.strip().splitlines()
    reason = message.split("no requested combination can run here: ", 1)[1]
    assert reason.startswith("eager on cuda needs a CUDA device, and torch 2.9.0+cu128 sees none")
    assert ";" not in reason
    assert not (tmp_path / "out").exists()  # no empty output folder left behind


@pytest.mark.parametrize("spelt", ["pjrt", "Pjrt", "PJRT"])
def test_xla_is_read_in_any_case(cli_on_a_cpu_box, capsys, spelt):
    code, out, err = cli_on_a_cpu_box("--accelerator=CPU", f"--xla={spelt}", "--dynamo=None",
                                      "--test=EVAL", "-k", "^mlp$", "--dry-run", capsys=capsys)
    assert code == 0, err
    assert "mlp: cpu xla=PJRT dynamo=None torch_xla2=None test=eval" in out


def test_a_value_no_choice_spells_is_refused_with_the_choices(cli_on_a_cpu_box, capsys):
    with pytest.raises(SystemExit) as stop:
        cli_on_a_cpu_box("--xla=pjrtx", "--dry-run", capsys=capsys)
    assert stop.value.code == 2
    assert 'argument --xla: xla "pjrtx" is not one of: None, PJRT' in capsys.readouterr().err


def test_combinations_nobody_asked_for_are_not_reported(cli_on_a_cpu_box, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    code, _, _ = cli_on_a_cpu_box("--accelerator=cpu", "-k", "^mlp$", "--dry-run", capsys=capsys)
    assert code == 0
    assert not [r for r in caplog.records if "left out" in r.getMessage()
                and r.levelno >= logging.INFO]
    # The ones the expansion made are still there at debug level.
    assert [r for r in caplog.records if r.getMessage().startswith("dropped ")
            and "dynamo=openxla" in r.getMessage() and r.levelno == logging.DEBUG]


def test_a_value_asked_for_that_cannot_run_is_reported_with_its_reason(
        cli_on_a_cpu_box, capsys, caplog):
    caplog.set_level(logging.INFO)
    code, _, _ = cli_on_a_cpu_box("--accelerator=cpu", "--accelerator=cuda", "-k", "^mlp$",
                                  "--dry-run", capsys=capsys)
    assert code == 0
    (left_out,) = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert left_out.startswith("left out accelerator=cuda (")
    assert left_out.endswith("eager on cuda needs a CUDA device, and torch 2.9.0+cu128 sees none")


def test_list_stacks_leaves_test_only_stacks_out(capsys, monkeypatch):
    monkeypatch.setattr(app.signals, "install", lambda: None)
    assert app.main(["--list-stacks"]) == 0
    names = [row.split(":", 1)[0] for row in capsys.readouterr().out.splitlines()]
    assert "eager" in names and "dynamo" in names
    assert "debug_perturb" not in names


def test_small_models_are_a_flag(capsys, monkeypatch):
    monkeypatch.setattr(app.signals, "install", lambda: None)
    monkeypatch.delenv("EXPERIMENT_RUNNER_SMALL_MODELS", raising=False)
    assert app.main(["--suite-name=timm", "--list-models"]) == 0
    full = dict(row.split("\t") for row in capsys.readouterr().out.splitlines())
    assert app.main(["--suite-name=timm", "--list-models", "--small-models"]) == 0
    small = dict(row.split("\t") for row in capsys.readouterr().out.splitlines())
    assert small.keys() == full.keys()
    assert max(map(int, small.values())) <= 4 < max(map(int, full.values()))


def test_gpus_are_shared_by_default_only_where_every_experiment_is_a_cuda_one_that_shares():
    from core.config import ExperimentConfig, ModelConfig
    from runner.plan.matrix import Plan, PlannedExperiment

    def planned(accelerator, stack, dynamo=None, torch_xla2=None):
        experiment = ExperimentConfig(accelerator, None, dynamo, torch_xla2, "eval", stack=stack)
        return PlannedExperiment(ModelConfig("builtin", "mlp"), experiment, stack)

    compiled, eager = planned("cuda", "dynamo", "inductor"), planned("cuda", "eager")
    assert app.gpus_shareable(Plan(experiments=[compiled, eager]))
    assert not app.gpus_shareable(Plan(experiments=[compiled, planned("cpu", "eager")]))
    assert not app.gpus_shareable(Plan(experiments=[eager, planned("cuda", "torchax",
                                                                   torch_xla2="torch_export")]))
