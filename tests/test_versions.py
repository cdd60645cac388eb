"""Lines of several versions: configurations the table tells apart stay apart, in the reports,
resume and claims; a results file of the previous version reads as it did."""

import hashlib
import json
from pathlib import Path

import pytest

from core.config import ExperimentConfig, ModelConfig, RunSettings, fingerprint
from core.files.results_file import ResultsFile
from core.schema import ResultLine, Status, VerificationCode
from reports.read.load import load
from runner.run.record.claims import Claims, ClaimStatus, RunnerIdentity
from runner.plan.resume import recorded_fingerprints

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "results_v1.jsonl"
MODEL = ModelConfig("builtin", "mlp")


def timed_line(experiment: ExperimentConfig, times=(0.02, 0.01, 0.01), **fields) -> dict:
    import backends

    stack = backends.stack_for(experiment)
    experiment = stack.planned(experiment, {})
    return ResultLine(MODEL, experiment, RunSettings(repeat=2), Status.OK,
                      VerificationCode.VERIFIER_SKIPPED, stack_label=stack.label(experiment),
                      metrics={"per_iter_time": list(times)}, summary={"cold_start_entries": 1},
                      run_id="run-1", **fields).to_dict()


def previous_fingerprint(line: dict, defaults: dict) -> str:
    """The fingerprint the previous version stored: fields at its defaults left out."""
    experiment = {k: v for k, v in line["experiment"].items()
                  if k not in ("stack", "accelerator_model", "requested_batch_size", "seed")
                  and defaults.get(k, object()) != v}
    experiment["batch_size"] = line["experiment"]["requested_batch_size"]
    experiment = {k: v for k, v in experiment.items() if defaults.get(k, object()) != v}
    model = {k: v for k, v in line["model"].items() if k in ("suite_name", "model_name")}
    payload = json.dumps({"model": model, "experiment": experiment}, sort_keys=True,
                         separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


#: The defaults of two versions that differ in one: the matmul precision (highest, then high).
OLD_DEFAULTS = {"xla_flags": None, "precision": "fp32", "batch_size": None,
                "matmul_precision": "highest", "disable_tf32": False,
                "fp16_bf16_reduction_math_sdp": False, "mode": None,
                "enable_functionalization": False, "optimizer": None, "amp_dtype": None,
                "fullgraph": False, "stack_options": {}}
NEW_DEFAULTS = dict(OLD_DEFAULTS, matmul_precision="high")


def two_versions_lines() -> list[dict]:
    """inductor eval at each version's default matmul precision, as each version wrote it:
    the same stored fingerprint (defaults were left out), no schema_version."""
    lines = []
    for defaults in (OLD_DEFAULTS, NEW_DEFAULTS):
        line = timed_line(ExperimentConfig("cpu", None, "inductor", None, "eval",
                                           matmul_precision=defaults["matmul_precision"],
                                           fp16_bf16_reduction_math_sdp=False))
        del line["schema_version"], line["experiment"]["seed"]
        line["fingerprint"] = previous_fingerprint(line, defaults)
        lines.append(line)
    assert lines[0]["fingerprint"] == lines[1]["fingerprint"]  # the collision reproduced
    return lines


def write(tmp_path: Path, lines: list[dict]) -> Path:
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_lines_of_two_versions_with_different_defaults_stay_two_experiments_in_the_report(tmp_path):
    loaded = load([write(tmp_path, two_versions_lines())])
    assert len(loaded.records) == 2 and loaded.superseded == 0
    assert sorted(r.config.label for r in loaded.records) == [
        "cpu inductor eval fp32 fp16_bf16_reduction_math_sdp=False",
        "cpu inductor eval fp32 matmul_precision=highest fp16_bf16_reduction_math_sdp=False"]
    assert len({r.key for r in loaded.records}) == 2


def test_lines_of_two_versions_with_different_defaults_stay_two_experiments_for_resume_and_claims(tmp_path):
    old, new = two_versions_lines()
    highest = ExperimentConfig("cpu", None, "inductor", None, "eval", matmul_precision="highest",
                               fp16_bf16_reduction_math_sdp=False)
    high = ExperimentConfig("cpu", None, "inductor", None, "eval", matmul_precision="high",
                            fp16_bf16_reduction_math_sdp=False)
    assert recorded_fingerprints([old], RunSettings()) == {fingerprint(MODEL, highest)}
    assert recorded_fingerprints([new], RunSettings()) == {fingerprint(MODEL, high)}
    # Runners of two versions planning their default never wait on each other's claim.
    results = ResultsFile(write(tmp_path, [old]))
    first = Claims(results, RunSettings(), RunnerIdentity.of_this_process("first"))
    second = Claims(results, RunSettings(), RunnerIdentity.of_this_process("second"))
    assert first.claim(fingerprint(MODEL, high))[0] is ClaimStatus.CLAIMED
    assert second.claim(fingerprint(MODEL, highest))[0] is ClaimStatus.RECORDED
    assert second.claim(fingerprint(MODEL, dataclasses_replace(high, seed=5)))[0] is ClaimStatus.CLAIMED


def dataclasses_replace(experiment, **changes):
    import dataclasses

    return dataclasses.replace(experiment, **changes)


def test_two_fullgraph_configurations_are_two_rows(tmp_path):
    plain = ExperimentConfig("cpu", None, "inductor", None, "eval")
    lines = [timed_line(ExperimentConfig("cpu", None, None, None, "eval")),
             timed_line(plain), timed_line(dataclasses_replace(plain, fullgraph=True),
                                           times=(0.02, 0.04, 0.04))]
    loaded = load([write(tmp_path, lines)])
    labels = sorted(r.config.label for r in loaded.records)
    assert labels == ["cpu eager eval fp32", "cpu inductor eval fp32",
                      "cpu inductor eval fp32 fullgraph=True"]
    fullgraph = next(r for r in loaded.records if "fullgraph" in r.config.label)
    # Compared against the same eager baseline: fullgraph is the compiler's own switch.
    assert fullgraph.config.baseline_key("eager").label == "cpu eager eval fp32"


def test_a_results_file_of_the_previous_version_groups_as_before(tmp_path):
    """tests/fixtures/results_v1.jsonl was written by the version before schema_version
    (two sweeps of mlp). Its report groups the lines as that version's did (the labels it
    printed), and now also shows the fullgraph switch it merged."""
    loaded = load([FIXTURE])
    assert [line.get("schema_version") for line in map(json.loads, FIXTURE.open())] == [None] * 5
    assert len(loaded.records) == 5 and not loaded.bad_lines and not loaded.unusable
    assert sorted(r.config.label for r in loaded.records) == [
        "cpu eager eval fp32", "cpu eager train fp32", "cpu inductor eval fp32",
        "cpu inductor eval fp32 matmul_precision=highest fullgraph=True",
        "cpu inductor train fp32"]


def test_resuming_a_results_file_of_the_previous_version_reruns_nothing_it_holds():
    from runner.plan.matrix import MatrixRequest, build_plan
    from core.host.machine import HostCapabilities
    from models import get_suite

    lines = [json.loads(text) for text in FIXTURE.open()]
    host = HostCapabilities(torch_version="2.9.0", dynamo_backends=("inductor",),
                            packages={"torch": "2.9.0"})
    recorded = recorded_fingerprints(lines, RunSettings())
    first = build_plan(get_suite("builtin"), MatrixRequest.of(
        accelerator=("cpu",), xla=(None,), dynamo=(None, "inductor"), test=("eval", "train"),
        filters=("^mlp$",)), host, recorded)
    second = build_plan(get_suite("builtin"), MatrixRequest.of(
        accelerator=("cpu",), xla=(None,), dynamo=("inductor",), test=("eval",),
        matmul_precision="highest", fullgraph=True, filters=("^mlp$",)), host, recorded)
    assert (len(first.experiments), len(first.already_recorded)) == (0, 4)
    assert (len(second.experiments), len(second.already_recorded)) == (0, 1)


@pytest.mark.e2e
def test_the_runner_resumes_a_results_file_of_the_previous_version(run_cli, tmp_path):
    """The two commands that wrote the fixture (its lines' `command`), run again over it by
    the real runner: nothing to run."""
    import shlex
    import shutil

    output = tmp_path / "output"
    output.mkdir()
    shutil.copy(FIXTURE, output / "results.jsonl")
    commands = list(dict.fromkeys(json.loads(text)["command"] for text in FIXTURE.open()))
    expected = ["0 experiment(s) would run; 4 already recorded",
                "0 experiment(s) would run; 1 already recorded"]
    for command, summary in zip(commands, expected):
        run = run_cli("--dry-run", *shlex.split(command)[1:], output_dir=output)
        assert run.returncode == 0, run.stderr
        assert summary in run.stdout, run.stdout
