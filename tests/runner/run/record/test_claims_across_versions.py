"""Two runner versions on one results file (issue 54, rough edge): claims keyed by each
version's fingerprint let both run the same experiment, and one measurement was discarded.
Claims are keyed so that versions that differ by fields added since see each other's."""

from __future__ import annotations

import dataclasses
from typing import Any

from core.config import ExperimentConfig, ModelConfig, RunSettings, fingerprint
from core.fields import EXPERIMENT, MODEL, UNVERSIONED, identity_fields
from core.files.results_file import ResultsFile
from runner.run.record.claims import (ClaimOptions, Claims, ClaimStatus, RunnerIdentity,
                                      claim_key, claim_key_of)

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
