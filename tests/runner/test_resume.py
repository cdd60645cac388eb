"""Which recorded lines cover what a new sweep would measure."""

from core.config import RunSettings
from runner.resume import covers, recorded_fingerprints


def test_what_a_recorded_line_covers():
    timed = {"status": "ok", "metrics": {"per_iter_time": [1.0]}, "verification_code": "VERIFIER_SKIPPED"}
    verified_only = {"status": "ok", "metrics": {}, "verification_code": "PASS"}
    failed = {"status": "failed", "metrics": {"error": "x"}, "verification_code": "VERIFIER_DIDNT_RUN"}
    timing, verify, verify_only = RunSettings(), RunSettings(verify=True), RunSettings(verify=True, verify_only=True)
    assert covers(timed, timing) and not covers(timed, verify) and not covers(timed, verify_only)
    assert covers(verified_only, verify_only) and not covers(verified_only, timing)
    assert all(covers(failed, s) for s in (timing, verify, verify_only))


def test_lines_of_the_wrong_shape_cover_nothing_and_do_not_crash():
    odd = [{"model": {"suite_name": "b", "model_name": "m"}, "experiment": "abc", "status": "failed"},
           {"model": {"suite_name": "b", "model_name": "m"},
            "experiment": {"accelerator": "cpu", "xla": None, "dynamo": None, "torch_xla2": None,
                           "test": "eval"}, "status": "ok", "metrics": [1, 2, 3]}]
    assert recorded_fingerprints(odd, RunSettings()) == frozenset()
