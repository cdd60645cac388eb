"""The model suites through the real runner: timm, Hugging Face, TorchBench, precisions."""

import subprocess

import pytest


from tests.conftest import PROJECT_ROOT, CliRun, cli_command, cli_environment

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)

FAKE_TORCHBENCH = PROJECT_ROOT / "tests" / "fixtures" / "fake_torchbench"
BASE = ["--accelerator=cpu", "--xla=None", "--repeat=2", "--warmup=1"]


def sweep(output, *args, small=True):
    environment = cli_environment()
    if small:
        environment["EXPERIMENT_RUNNER_SMALL_MODELS"] = "1"
    completed = subprocess.run(cli_command(output, *BASE, *args), capture_output=True,
                               text=True, env=environment, timeout=1200)
    assert completed.returncode == 0, completed.stderr
    return CliRun(0, completed.stdout, completed.stderr, output).lines()


def by_key(lines):
    return {(l["model"]["model_name"], l["experiment"]["dynamo"], l["experiment"]["test"]): l
            for l in lines}


def test_torchbench_adapter_runs_and_writes_the_skip_as_a_line(tmp_path):
    lines = sweep(tmp_path / "tb", "--suite-name=torchbench", f"--torchbench-dir={FAKE_TORCHBENCH}",
                  "--dynamo=None", "--test=eval", "--test=train", small=False)
    statuses = {(l["model"]["model_name"], l["experiment"]["test"]): l["status"] for l in lines}
    skipped = [l for l in lines if l["status"] == "skipped"]
    assert len(lines) == 4 and len(skipped) == 1
    assert skipped[0]["skip_reason"] and skipped[0]["verification_code"] == "VERIFIER_SKIPPED"
    assert sum(s == "ok" for s in statuses.values()) == 3


def test_a_missing_torchbench_dir_is_named(tmp_path):
    completed = subprocess.run(
        cli_command(tmp_path / "o", "--suite-name=torchbench", f"--torchbench-dir={tmp_path}/nope",
                    "--dry-run"),
        capture_output=True, text=True, env=cli_environment(), timeout=120)
    assert completed.returncode == 2
    assert "nope" in completed.stderr and "Traceback" not in completed.stderr


@pytest.mark.long
def test_every_precision_and_an_optimizer_on_one_model(tmp_path):
    lines = sweep(tmp_path / "p", "-k", "^mlp$", "--dynamo=None", "--test=train",
                  "--precision=fp32", "--precision=bf16", "--precision=fp16", "--precision=amp",
                  "--optimizer=sgd", "--batch-size=4", "--batch-size=8", "--verify")
    assert len(lines) == 8
    for line in lines:
        assert line["status"] == "ok", line["metrics"].get("error")
        assert line["experiment"]["optimizer"] == "sgd"
        assert line["experiment"]["batch_size"] == line["experiment"]["requested_batch_size"]
        assert line["verification_code"] == "PASS", line.get("verification_reason")
    assert {l["experiment"]["precision"] for l in lines} == {"fp32", "bf16", "fp16", "amp"}


@pytest.mark.long
def test_tied_weights_and_model_outputs_run_on_torchax_and_verify(tmp_path):
    # BertForMaskedLM ties its LM head to the embedding and returns a ModelOutput.
    lines = sweep(tmp_path / "tax", "--suite-name=huggingface", "-k", "^BertForMaskedLM$",
                  "--torch-xla2=extract_jax", "--test=eval", "--test=train", "--verify")
    assert len(lines) == 2
    for line in lines:
        assert line["status"] == "ok", line["metrics"].get("error")
        assert line["verification_code"] == "PASS", line.get("verification_reason")
