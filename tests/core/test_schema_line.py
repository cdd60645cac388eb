"""The results line in PyTorch/XLA's layout: per-run lists, a summary, the batch size used."""

from core.config import ExperimentConfig, ModelConfig, RunSettings, fingerprint, fingerprint_of_line
from core.host.machine import HostCapabilities, cpu_model_name
from core.schema import (
    ResultLine,
    Status,
    VerificationCode,
    cold_start_entries,
    has_timings,
    timed_values,
)
from runner.plan.resume import recorded_fingerprints

MODEL = ModelConfig("builtin", "mlp")
DEFAULT = ExperimentConfig("cpu", None, "inductor", None, "eval")
ASKED_4 = ExperimentConfig("cpu", None, "inductor", None, "eval", batch_size=4)


def line(experiment=DEFAULT, status=Status.OK, **fields):
    return ResultLine(MODEL, experiment, RunSettings(repeat=2), status,
                      VerificationCode.VERIFIER_SKIPPED, **fields).to_dict()


def test_metrics_hold_only_per_run_lists_and_the_rest_goes_to_the_summary():
    written = line(metrics={"total_time": [3.0, 1.0, 1.2], "per_iter_time": [3.0, 1.0, 1.2],
                            "jax_compile_count": [1, 0, None], "cold_start_time": 3.0,
                            "dynamo_graph_break_reasons": {}, "empty": [],
                            "per_run_dicts": [{"a": 1}], "flags": [True]},
                   summary={"cold_start_entries": 1, "wall_time": 9.0})
    assert written["metrics"] == {"total_time": [3.0, 1.0, 1.2], "per_iter_time": [3.0, 1.0, 1.2],
                                  "jax_compile_count": [1, 0, None]}
    assert written["summary"] == {"cold_start_time": 3.0, "dynamo_graph_break_reasons": {},
                                  "per_run_dicts": [{"a": 1}], "flags": [True],
                                  "cold_start_entries": 1, "wall_time": 9.0}
    assert cold_start_entries(written) == 1 and timed_values(written, "per_iter_time") == [1.0, 1.2]
    assert has_timings(written)


def test_old_lines_keep_their_figures_in_metrics_and_have_no_cold_entry():
    old = {"metrics": {"per_iter_time": [1.0, 2.0], "cold_start_time": 5.0}}
    assert cold_start_entries(old) == 0 and timed_values(old, "per_iter_time") == [1.0, 2.0]


def test_failed_and_skipped_lines_carry_peer_errors():
    failed = line(status=Status.FAILED, metrics={"error": "boom"})
    skipped = line(status=Status.SKIPPED, skip_reason="not implemented")
    assert failed["metrics"] == {"error": "boom"}
    assert skipped["metrics"] == {"error": "SKIP"} and skipped["skip_reason"] == "not implemented"
    assert all(l["experiment"]["accelerator_model"] is None for l in (failed, skipped))


def test_the_batch_size_used_is_shown_and_the_requested_one_keeps_the_identity():
    for experiment, used in ((DEFAULT, 16), (ASKED_4, 4), (DEFAULT, None)):
        written = line(experiment, batch_size_used=used)
        shown = written["experiment"]
        assert shown["batch_size"] == (used if used is not None else experiment.batch_size)
        assert shown["requested_batch_size"] == experiment.batch_size
        assert fingerprint_of_line(written) == written["fingerprint"] == fingerprint(MODEL, experiment)
    # A line written before requested_batch_size held the requested size in batch_size.
    old = {"model": MODEL.to_dict(), "experiment": ASKED_4.to_dict()}
    assert fingerprint_of_line(old) == fingerprint(MODEL, ASKED_4)


def test_resume_recognises_new_and_old_lines():
    new = line(batch_size_used=16, metrics={"per_iter_time": [2.0, 1.0, 1.0]},
               summary={"cold_start_entries": 1})
    old = {"model": MODEL.to_dict(), "experiment": ASKED_4.to_dict(), "status": "ok",
           "metrics": {"per_iter_time": [1.0]}, "verification_code": "VERIFIER_SKIPPED"}
    assert recorded_fingerprints([new, old], RunSettings()) == {
        fingerprint(MODEL, DEFAULT), fingerprint(MODEL, ASKED_4)}


def test_the_sweeps_timestamp_and_the_lines_finish_time():
    written = line(timestamp=1700000000.0)
    assert written["timestamp"] == 1700000000.0 and written["finished_at"] > written["timestamp"]


def test_the_parent_names_the_device_of_lines_the_child_did_not():
    host = HostCapabilities(cuda_available=True, cuda_device_names=("NVIDIA H100 80GB HBM3",),
                            packages={"libtpu": "0.1"})
    assert host.accelerator_model("cpu") == cpu_model_name() and cpu_model_name()
    assert host.accelerator_model("cuda") == "NVIDIA H100 80GB HBM3"
    assert host.accelerator_model("tpu") == "TPU"
    assert HostCapabilities().accelerator_model("cuda") is None


def test_the_headline_of_an_error_says_what_happened():
    from core.schema import error_headline

    ours = ("the child was killed by SIGSEGV (segmentation fault)\nlast output of the child:\n"
            "  _C._set_float32_matmul_precision(precision)")
    assert error_headline(ours) == "the child was killed by SIGSEGV (segmentation fault)"
    peer = 'Traceback (most recent call last):\n  File "x", line 1\nRuntimeError: boom\n'
    assert error_headline(peer) == "RuntimeError: boom"
    assert error_headline("\n  \n") == "" and error_headline("\n one \n") == "one"
