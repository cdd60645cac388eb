"""Which recorded lines cover what a new sweep would measure."""

from core.config import RunSettings
from runner.plan.resume import covers, recorded_fingerprints


def test_what_a_recorded_line_covers():
    timed = {"status": "ok", "metrics": {"per_iter_time": [1.0]}, "verification_code": "VERIFIER_SKIPPED"}
    verified_only = {"status": "ok", "metrics": {}, "verification_code": "PASS"}
    failed = {"status": "failed", "metrics": {"error": "x"}, "verification_code": "VERIFIER_DIDNT_RUN"}
    timing, verify, verify_only = RunSettings(), RunSettings(verify=True), RunSettings(verify=True, verify_only=True)
    assert covers(timed, timing) and not covers(timed, verify) and not covers(timed, verify_only)
    assert covers(verified_only, verify_only) and not covers(verified_only, timing)
    assert all(covers(failed, s) for s in (timing, verify, verify_only))


def test_a_failure_of_the_infrastructure_covers_nothing_and_resume_retries_it():
    infrastructure = {"status": "failed", "metrics": {"error": "its fork server ended"},
                      "verification_code": "VERIFIER_DIDNT_RUN", "failure_kind": "infrastructure"}
    own = dict(infrastructure, failure_kind="experiment")
    for settings in (RunSettings(), RunSettings(verify=True), RunSettings(verify=True, verify_only=True)):
        assert not covers(infrastructure, settings) and covers(own, settings)


def test_lines_of_the_wrong_shape_cover_nothing_and_do_not_crash():
    odd = [{"model": {"suite_name": "b", "model_name": "m"}, "experiment": "abc", "status": "failed"},
           {"model": {"suite_name": "b", "model_name": "m"},
            "experiment": {"accelerator": "cpu", "xla": None, "dynamo": None, "torch_xla2": None,
                           "test": "eval"}, "status": "ok", "metrics": [1, 2, 3]}]
    assert recorded_fingerprints(odd, RunSettings()) == frozenset()


# Resume reads lines of any shape (issue 12, item 4): fuzzed.

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=12)
MODEL_KEYS = ("suite_name", "model_name", "reduced", "torchbench_dir")
EXPERIMENT_KEYS = ("accelerator", "xla", "dynamo", "torch_xla2", "test", "xla_flags", "precision",
                   "batch_size", "matmul_precision", "stack_options", "stack", "optimizer")
LINES = st.fixed_dictionaries({}, optional={
    "model": ANY_JSON | st.dictionaries(st.sampled_from(MODEL_KEYS), ANY_JSON),
    "experiment": ANY_JSON | st.dictionaries(st.sampled_from(EXPERIMENT_KEYS), ANY_JSON),
    "status": ANY_JSON | st.sampled_from(["ok", "failed", "skipped"]),
    "metrics": ANY_JSON | st.fixed_dictionaries({"per_iter_time": ANY_JSON}),
    "verification_code": ANY_JSON | st.sampled_from(["PASS", "VERIFIER_SKIPPED"]),
    "seed": ANY_JSON,
    "fingerprint": ANY_JSON,
})


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, max_size=5), st.booleans(), st.booleans())
def test_lines_of_any_shape_never_crash_resume(lines, verify, verify_only):
    recorded = recorded_fingerprints(lines, RunSettings(verify=verify or verify_only, verify_only=verify_only))
    assert all(isinstance(value, str) and len(value) == 64 for value in recorded)


def test_a_newer_schemas_line_with_identity_this_version_cannot_read_covers_nothing():
    # Issue 43, defect 7: a newer runner's experiment (a new identity field at a value other
    # than its default) hid this version's, which was never run.
    from core.config import ExperimentConfig, ModelConfig, fingerprint, unreadable_identity
    from core.fields import SCHEMA_VERSION
    from core.schema import ResultLine, Status, VerificationCode

    model, experiment = ModelConfig("builtin", "mlp"), ExperimentConfig("cpu", None, None, None, "eval")
    ours = ResultLine(model, experiment, RunSettings(), Status.OK, VerificationCode.VERIFIER_SKIPPED,
                      metrics={"per_iter_time": [0.1]}).to_dict()
    newer = dict(ours, schema_version=SCHEMA_VERSION + 1,
                 experiment={**ours["experiment"], "sparsity": "2:4"})
    assert unreadable_identity(newer) == ["experiment.sparsity"]
    assert not covers(newer, RunSettings())
    assert recorded_fingerprints([newer], RunSettings()) == frozenset()
    # Our own lines, older ones and a newer one holding only fields we know still cover.
    assert recorded_fingerprints([ours], RunSettings()) == {fingerprint(model, experiment)}
    plain_newer = dict(ours, schema_version=SCHEMA_VERSION + 1)
    assert unreadable_identity(plain_newer) == [] and covers(plain_newer, RunSettings())
    older = dict(ours, experiment={**ours["experiment"], "sparsity": "2:4"})
    older.pop("schema_version")
    assert unreadable_identity(older) == []
