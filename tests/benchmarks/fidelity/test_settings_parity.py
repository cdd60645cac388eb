"""benchmarks/fidelity/settings_parity.py: the settings PyTorch's harness and ours time under,
compared."""

from __future__ import annotations

import json
import os
import types

import pytest
import torch

from benchmarks.fidelity import harness_settings, settings_parity as parity
from child.settings import settings_snapshot
from tests.conftest import cli_environment, probe_as_runners_key_it

REFERENCE = parity.DEFAULT_REFERENCE


def test_a_case_is_parsed_or_named_as_bad():
    case = parity.Case.parse("timm mobilenetv2_100 8 amp default")
    assert (case.test, str(case)) == ("eval", "timm mobilenetv2_100 8 amp default eval")
    for text in ("torchbench x 8 amp default eval", "timm x 8 fp8 default eval", "timm x"):
        with pytest.raises(ValueError):
            parity.Case.parse(text)


def test_differences_are_explained_only_by_an_entry_for_their_setting_and_device():
    entries = [{"setting": "dynamo.repro", "reason": "minifier only"},
               {"setting": "mkldnn.", "devices": ["cuda"], "reason": "CPU kernels only"}]
    row = parity.Row(parity.Case.parse("timm m 8 amp default eval"))
    parity.compare({"dynamo.repro_tolerance": 1e-4, "mkldnn.matmul.fp32_precision": "none",
                    "cpu_affinity": [0], "sdpa.flash": True},
                   {"mkldnn.matmul.fp32_precision": "tf32", "cpu_affinity": [1],
                    "sdpa.flash": False}, entries, "cpu", row)
    assert row.explained == ["dynamo.repro_tolerance: 0.0001 vs null (minifier only)"]
    assert row.differences == ['mkldnn.matmul.fp32_precision: "none" vs "tf32"',
                               "sdpa.flash: true vs false"]
    assert row.status == "DIFFERENT"


def test_the_harness_runners_autocast_is_found_through_its_iteration_function():
    class Runner:
        autocast_arg = {"dtype": torch.bfloat16}

        def autocast(self, **kwargs):
            return torch.autocast("cpu", **kwargs)

        def forward_pass(self, mod, inputs, collect_outputs=True):
            return mod

    context = harness_settings.iteration_context(Runner().forward_pass)
    inside = settings_snapshot("cpu", iteration_context=context)
    assert inside["autocast.cpu.dtype"] == "torch.bfloat16"
    assert harness_settings.iteration_context(lambda mod, inputs: mod) is None


def test_the_first_timed_call_writes_the_snapshot_and_timing_goes_on(tmp_path):
    calls = []
    common = types.SimpleNamespace(timed=lambda model, fn, inputs, **kw: calls.append(inputs) or 0.5)
    out = tmp_path / "settings.json"
    harness_settings.record_at_first_timed_call(common, out, "cpu", False, settings_snapshot)
    with torch.no_grad():
        assert common.timed("model", len, "first") == 0.5
    written = out.read_text()
    assert common.timed("model", len, "second") == 0.5
    assert calls == ["first", "second"] and out.read_text() == written
    record = json.loads(written)
    assert record["settings"]["grad_enabled"] is False and record["iteration_context"] is False


def test_the_device_is_read_from_the_harness_arguments():
    assert harness_settings.device_of(["--device", "cpu", "--only", "x"]) == "cpu"
    assert harness_settings.device_of(["--device=cpu"]) == "cpu"
    assert harness_settings.device_of(["--only", "x"]) == "cuda"


@pytest.mark.e2e
@pytest.mark.skipif(not (REFERENCE / "common.py").exists(),
                    reason=f"the harness is not beside the clone ({REFERENCE})")
def test_on_the_cpu_both_tools_time_under_the_same_settings_but_explained_ones(tmp_path, capsys,
                                                                            monkeypatch):
    """Two small cases, one of each list, an inference in fp32 and a training under autocast,
    with dynamo's eager backend (no compile): every difference the CPU can show is explained."""
    # The tools get the environment of the other tests' runners (the offline variables
    # added), whose fork servers they then share.
    offline = parity.tool_environment().items() - os.environ.items()
    monkeypatch.setattr(parity, "tool_environment", lambda: {**cli_environment(), **dict(offline)})
    # The probe's answer with inductor's checks, as a compiling sweep of the test run leaves
    # it (ours' children then take its outcomes, eager ones too): the same every run.
    given = probe_as_runners_key_it().child_environment.get("TORCHINDUCTOR_VEC_ISA_OK")
    keep = tmp_path / "keep"
    code = parity.main(["--device", "cpu", "--backend", "eager", "--keep", str(keep),
                        "--case", "huggingface DistilBertForMaskedLM 1 fp32 default eval",
                        "--case", "timm mobilenetv2_100 1 amp default train"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "2 cases on cpu (eager): " in out and "0 with unexplained" in out
    # The harness's snapshot was taken inside it: its own dynamo setting, its grad mode for
    # the test and its autocast, as ours.
    assert "explained: dynamo.repro_tolerance: 0.0001 vs null" in out
    assert ("explained: inductor.cpp.vec_isa_ok: null vs true" in out) == (given == "1")
    inference, training = (json.loads((keep / f"case-{index}" / "harness-settings.json")
                                      .read_text())["settings"] for index in (0, 1))
    assert inference["grad_enabled"] is False and inference["autocast.cpu.enabled"] is False
    assert training["grad_enabled"] is True and training["autocast.cpu.enabled"] is True
    assert training["autocast.cpu.dtype"] == "torch.bfloat16"
