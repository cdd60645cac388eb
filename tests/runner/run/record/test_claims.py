"""Several runners, one results file: claims (runner/run/record/claims.py), in-process and with real runners."""

from __future__ import annotations

import dataclasses
import json
import re
import signal
import subprocess
import time
from typing import Any

import psutil
import pytest

from core.config import ExperimentConfig, ModelConfig, RunSettings, fingerprint
from core.fields import EXPERIMENT, MODEL, UNVERSIONED, identity_fields
from core.files.results_file import ResultsFile, read_results
from runner.run.record.claims import (ClaimOptions, Claims, ClaimStatus, RunnerIdentity, claim_key,
                                      claim_key_of)
from tests.conftest import cli_command, cli_environment

FP = "f" * 64
LINE = {"model": {"suite_name": "builtin", "model_name": "mlp"}, "status": "failed",
        "metrics": {"error": "x"}, "fingerprint": FP}


def claims_for(results: ResultsFile, run_id: str, identity=None, **options) -> Claims:
    me = identity or RunnerIdentity.of_this_process(run_id)
    return Claims(results, RunSettings(), me, ClaimOptions(**options))


def line_with_fingerprint(results: ResultsFile, fingerprint: str = FP) -> dict:
    from core.config import ExperimentConfig, ModelConfig
    from core.schema import ResultLine, Status, VerificationCode

    model = ModelConfig("builtin", "mlp")
    experiment = ExperimentConfig("cpu", None, None, None, "eval")
    return ResultLine(model, experiment, RunSettings(), Status.FAILED,
                      VerificationCode.VERIFIER_DIDNT_RUN, metrics={"error": "x"}).to_dict()


def test_a_claim_is_exclusive_until_released(tmp_path):
    results = ResultsFile(tmp_path / "results.jsonl")
    first, second = claims_for(results, "run-a"), claims_for(results, "run-b")
    assert first.claim(FP)[0] is ClaimStatus.CLAIMED
    status, holder = second.claim(FP)
    assert status is ClaimStatus.BUSY and holder.runner.run_id == "run-a"
    stored = json.loads(first.path.read_text())[FP]
    assert stored["runner"]["pid"] > 0 and stored["runner"]["host"] and stored["heartbeat"] > 0
    first.release(FP)
    assert not first.path.exists()  # no claim left, no file left
    assert second.claim(FP)[0] is ClaimStatus.CLAIMED


def test_an_experiment_recorded_meanwhile_is_neither_claimed_nor_recorded_twice(tmp_path):
    results = ResultsFile(tmp_path / "results.jsonl")
    line = line_with_fingerprint(results)
    fingerprint = line["fingerprint"]
    slow, fast = claims_for(results, "slow"), claims_for(results, "fast")
    assert slow.claim(fingerprint)[0] is ClaimStatus.CLAIMED
    results.append(line)  # another runner got there first (its claim was taken over)
    assert slow.record(fingerprint, dict(line, run_id="slow")) is False
    assert slow.counts.left_out == 1
    assert fast.claim(fingerprint)[0] is ClaimStatus.RECORDED
    assert [l.get("run_id") for l in read_results(results.path).lines] == [""]


@pytest.mark.e2e
def test_the_claim_of_a_runner_gone_from_this_machine_is_taken_over(tmp_path):
    results = ResultsFile(tmp_path / "results.jsonl")
    finished = subprocess.Popen(["true"])
    started = psutil.Process(finished.pid).create_time() if psutil.pid_exists(finished.pid) else time.time()
    finished.wait()
    here = RunnerIdentity.of_this_process("x")
    gone = RunnerIdentity("dead", here.host, here.boot_id, finished.pid, started)
    reused = RunnerIdentity("reused", here.host, here.boot_id, here.pid, here.started - 1000)
    for identity in (gone, reused):
        claims_for(results, identity.run_id, identity).claim(FP)
        taker = claims_for(results, "taker")
        assert taker.claim(FP)[0] is ClaimStatus.CLAIMED and taker.counts.taken_over == 1
        taker.release(FP)


def test_another_machines_claim_lives_while_its_heartbeat_moves(tmp_path):
    results = ResultsFile(tmp_path / "results.jsonl")
    here = RunnerIdentity.of_this_process("x")
    remote = RunnerIdentity("remote", "other-host", "other-boot", 1, 0.0)
    watcher = claims_for(results, "watcher", stale_after_seconds=0.6)
    with claims_for(results, "remote", remote, heartbeat_seconds=0.1) as beating:
        assert beating.claim(FP)[0] is ClaimStatus.CLAIMED
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            assert watcher.claim(FP)[0] is ClaimStatus.BUSY
            time.sleep(0.1)
    assert watcher.claim(FP)[0] is ClaimStatus.CLAIMED  # released when its block ended
    assert here.host != "other-host"


def test_another_machines_claim_is_taken_over_once_its_heartbeat_stops(tmp_path):
    results = ResultsFile(tmp_path / "results.jsonl")
    remote = RunnerIdentity("remote", "other-host", "other-boot", 1, 0.0)
    claims_for(results, "remote", remote).claim(FP)  # no heartbeat: the machine died
    watcher = claims_for(results, "watcher", stale_after_seconds=0.5)
    assert watcher.claim(FP)[0] is ClaimStatus.BUSY
    time.sleep(0.7)
    assert watcher.claim(FP)[0] is ClaimStatus.CLAIMED and watcher.counts.taken_over == 1


@pytest.mark.parametrize("heartbeat", ["NaN", "Infinity", "-Infinity"])
def test_another_machines_claim_whose_heartbeat_is_not_finite_is_taken_over(tmp_path, heartbeat):
    results = ResultsFile(tmp_path / "results.jsonl")
    remote = RunnerIdentity("remote", "other-host", "other-boot", 1, 0.0)
    claims_for(results, "remote", remote).claim(FP)
    watcher = claims_for(results, "watcher", stale_after_seconds=3600)
    stored = json.loads(watcher.path.read_text())
    stored[FP]["heartbeat"] = float(heartbeat)  # json writes NaN / Infinity as Python reads them
    watcher.path.write_text(json.dumps(stored))
    assert heartbeat in watcher.path.read_text()
    assert watcher.claim(FP)[0] is ClaimStatus.CLAIMED and watcher.counts.taken_over == 1


@pytest.mark.parametrize("heartbeat", ['"12"', "true", "null", "[1]"])
def test_a_claim_whose_heartbeat_is_not_a_number_is_dropped(tmp_path, heartbeat):
    results = ResultsFile(tmp_path / "results.jsonl")
    remote = RunnerIdentity("remote", "other-host", "other-boot", 1, 0.0)
    claims_for(results, "remote", remote).claim(FP)
    watcher = claims_for(results, "watcher", stale_after_seconds=3600)
    text = re.sub(r'"heartbeat": [^,}]+', f'"heartbeat": {heartbeat}', watcher.path.read_text())
    watcher.path.write_text(text)
    assert watcher.claim(FP)[0] is ClaimStatus.CLAIMED
    assert json.loads(watcher.path.read_text())[FP]["runner"]["run_id"] == "watcher"


@pytest.mark.parametrize("pid", ["-1", "0", '"12"', "1.5", "true", str(2**80), "null"])
def test_a_claim_of_this_host_whose_pid_is_no_process_id_is_dropped(tmp_path, caplog, pid):
    # Issue 43, defect 1: pid -1 (or 0, or no int) crashed every run until the file went.
    results = ResultsFile(tmp_path / "results.jsonl")
    claims_for(results, "crashed").claim(FP)  # this host, this boot
    watcher = claims_for(results, "watcher")
    text = re.sub(r'"pid": [^,}]+', f'"pid": {pid}', watcher.path.read_text())
    watcher.path.write_text(text)
    assert watcher.claim(FP)[0] is ClaimStatus.CLAIMED
    assert json.loads(watcher.path.read_text())[FP]["runner"]["run_id"] == "watcher"
    assert "dropped" in caplog.text and "pid is" in caplog.text


def test_an_unreadable_claims_file_is_set_aside_with_a_warning_naming_it(tmp_path, caplog):
    results = ResultsFile(tmp_path / "results.jsonl")
    claims = claims_for(results, "run")
    claims.path.write_text('{"a": 1, "a": 2}')
    assert claims.claim(FP)[0] is ClaimStatus.CLAIMED
    assert f"the claims file {claims.path} does not fit" in caplog.text
    assert claims.path.with_name("results.jsonl.claims.unreadable").exists()


@pytest.mark.parametrize("content", [b"not json", b"[1, 2]", b'{"x": {"runner": 5}}', b"{" * 5000,
                                     # What a machine's crash may leave of an unsynced file.
                                     b"", b'{\n "' + FP.encode() + b'": {\n  "runner": {'])
def test_an_unreadable_claims_file_starts_afresh(tmp_path, content):
    results = ResultsFile(tmp_path / "results.jsonl")
    claims = claims_for(results, "run")
    claims.path.write_bytes(content)
    assert claims.claim(FP)[0] is ClaimStatus.CLAIMED


# Real runners sharing one output folder.

EAGER_FLAGS = ["--accelerator=cpu", "--xla=None", "--dynamo=None", "--test=eval", "--repeat=2",
         "--warmup=0"]


def start(output, *args, **kwargs):
    return subprocess.Popen(cli_command(output, *args), env=cli_environment(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def grandchild_pid(output, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for log in output.glob("*/*/time/child.log"):
            found = re.search(r"fault-model grandchild pid (\d+)", log.read_text())
            if found:
                return int(found.group(1))
        time.sleep(0.2)
    raise AssertionError("the hang model never started its grandchild")


@pytest.mark.e2e
def test_concurrent_runners_share_the_work_and_each_line_holds_its_own_childs_metrics(tmp_path):
    output = tmp_path / "output"
    runners = [start(output, *EAGER_FLAGS) for _ in range(3)]
    outputs = [runner.communicate(timeout=600) for runner in runners]
    assert [runner.returncode for runner in runners] == [0, 0, 0], outputs
    lines = read_results(output / "results.jsonl").lines
    assert sorted(line["model"]["model_name"] for line in lines) == ["cnn", "mlp", "transformer_block"]
    assert len({line["fingerprint"] for line in lines}) == 3
    for line in lines:
        folder = output / line["artifacts"]["time"]
        assert folder.parts[-2] == line["run_id"]
        child = json.loads((folder / "result.json").read_text())
        assert child["metrics"]["per_iter_time"] == line["metrics"]["per_iter_time"]
        spec = json.loads((folder / "spec.json").read_text())
        assert spec["model"]["model_name"] == line["model"]["model_name"]
    recorded = sum(int(re.search(r"(\d+) experiment\(s\) recorded in", out).group(1))
                   for out, _ in outputs)
    assert recorded == 3
    assert not (output / "results.jsonl.claims").exists()


HANG = ["--suite-name=faults", "-k", "^hang$", *EAGER_FLAGS]


@pytest.mark.e2e
def test_the_claim_of_a_killed_runner_is_taken_over(tmp_path):
    output = tmp_path / "output"
    killed = start(output, *HANG, "--subprocess-timeout=120")
    grandchild_pid(output)
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=60)
    assert (output / "results.jsonl.claims").exists()  # the claim outlives its runner
    taker = subprocess.run(cli_command(output, *HANG, "--subprocess-timeout=2"), env=cli_environment(),
                           capture_output=True, text=True, timeout=300)
    assert taker.returncode == 0, taker.stderr
    assert "taking over an experiment claimed by run" in taker.stderr
    (line,) = read_results(output / "results.jsonl").lines
    assert "past the timeout of 2 s" in line["metrics"]["error"]


@pytest.mark.e2e
@pytest.mark.waits
def test_a_runner_waits_for_the_experiment_a_live_runner_runs(tmp_path):
    output = tmp_path / "output"
    # Long enough that the second runner, however slowly it starts on a loaded machine,
    # finds the experiment still running.
    first = start(output, *HANG, "--subprocess-timeout=14")
    grandchild_pid(output)
    second = subprocess.run(cli_command(output, *HANG, "--subprocess-timeout=6"),
                            env=cli_environment(), capture_output=True, text=True, timeout=300)
    first.communicate(timeout=120)
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert "being run by other runners; waiting" in second.stderr
    assert "0 experiment(s) recorded" in second.stdout and "1 recorded by other runners" in second.stdout
    (line,) = read_results(output / "results.jsonl").lines
    assert line["status"] == "failed"


def test_a_dead_runners_claim_on_a_recorded_experiment_is_cleared(tmp_path):
    results = ResultsFile(tmp_path / "results.jsonl")
    line = line_with_fingerprint(results)
    here = RunnerIdentity.of_this_process("x")
    gone = RunnerIdentity("dead", here.host, here.boot_id, here.pid, here.started - 1000)
    claims_for(results, "dead", gone).claim(line["fingerprint"])
    results.append(line)  # it recorded its line, then died before releasing the claim
    later = claims_for(results, "later")
    assert later.claim(line["fingerprint"])[0] is ClaimStatus.RECORDED
    assert not later.path.exists()


def test_without_resume_a_recorded_line_does_not_cover_its_experiment(tmp_path):
    from core.config import RunSettings
    from core.files.results_file import ResultsFile
    from runner.run.record.claims import Claims, ClaimStatus, RunnerIdentity

    results = ResultsFile(tmp_path / "results.jsonl")
    line = {"model": {"suite_name": "builtin", "model_name": "mlp"},
            "experiment": {"accelerator": "cpu", "xla": None, "dynamo": None, "torch_xla2": None,
                           "test": "eval"},
            "status": "ok", "metrics": {"per_iter_time": [1.0]}}
    from core.config import fingerprint_of_line

    fingerprint = fingerprint_of_line(line)
    results.append(line)
    resuming = Claims(results, RunSettings(), RunnerIdentity.of_this_process("resuming"))
    assert resuming.claim(fingerprint)[0] is ClaimStatus.RECORDED
    exact = Claims(results, RunSettings(), RunnerIdentity.of_this_process("exact"), resume=False)
    assert exact.claim(fingerprint)[0] is ClaimStatus.CLAIMED
    assert exact.record(fingerprint, line)
    assert len(results.read().lines) == 2


# Two runner versions on one results file (issue 54, rough edge): claims keyed by each
# version's fingerprint let both run the same experiment, and one measurement was discarded.
# Claims are keyed so that versions that differ by fields added since see each other's.
MODEL_CONFIG = ModelConfig("builtin", "mlp")
EAGER = ExperimentConfig("cpu", None, None, None, "eval")


def as_older_version_sees_it(model: ModelConfig, experiment: ExperimentConfig) -> dict[str, Any]:
    """The identity a runner of the first schema version computes: without the fields added
    since."""
    identity = {MODEL: model.identity(), EXPERIMENT: experiment.identity()}
    for scope in (MODEL, EXPERIMENT):
        for spec in identity_fields(scope):
            if spec.since > UNVERSIONED:
                identity[scope].pop(spec.name, None)
    return identity


def runner(results: ResultsFile, run_id: str) -> Claims:
    me = dataclasses.replace(RunnerIdentity.of_this_process(run_id), run_id=run_id)
    return Claims(results, RunSettings(), me, ClaimOptions())


def test_versions_that_differ_by_fields_added_since_key_one_experiment_alike():
    assert any(spec.since > UNVERSIONED for spec in identity_fields(EXPERIMENT))
    older = as_older_version_sees_it(MODEL_CONFIG, EAGER)
    assert claim_key(older) == claim_key_of(MODEL_CONFIG, EAGER)
    # Another experiment keys apart: a field added since, at another value than implied.
    frozen = dataclasses.replace(EAGER, dynamo="inductor", freezing=True)
    assert claim_key_of(MODEL_CONFIG, frozen) != claim_key_of(
        MODEL_CONFIG, dataclasses.replace(EAGER, dynamo="inductor"))
    assert claim_key_of(MODEL_CONFIG, EAGER) != claim_key_of(
        MODEL_CONFIG, dataclasses.replace(EAGER, test="train"))


def test_a_runner_of_another_version_sees_the_claim_and_waits(tmp_path):
    results = ResultsFile(tmp_path / "results.jsonl")
    this_version, older = runner(results, "this"), runner(results, "older")
    mine = fingerprint(MODEL_CONFIG, EAGER)
    theirs = "0" * 64  # its fingerprint of the same experiment differs
    assert this_version.claim(mine, claim_key_of(MODEL_CONFIG, EAGER))[0] is ClaimStatus.CLAIMED
    status, holder = older.claim(theirs, claim_key(as_older_version_sees_it(MODEL_CONFIG, EAGER)))
    assert status is ClaimStatus.BUSY and holder.runner.run_id == "this"
    this_version.release(claim_key_of(MODEL_CONFIG, EAGER))
    assert older.claim(theirs, claim_key(
        as_older_version_sees_it(MODEL_CONFIG, EAGER)))[0] is ClaimStatus.CLAIMED
