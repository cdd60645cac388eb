"""A child's steps and their seconds (core/phases.py)."""

from __future__ import annotations

import time

from core.phases import Phases


def test_each_mark_closes_the_step_since_the_last_and_a_repeated_name_adds_up():
    phases = Phases()
    time.sleep(0.02)
    phases.mark("build_s")
    time.sleep(0.01)
    phases.mark("reference_s")
    phases.skip()
    time.sleep(0.01)
    phases.mark("reference_s")
    record = phases.to_dict()
    assert list(record) == ["started_at", "build_s", "reference_s"]
    assert 0.02 <= record["build_s"] < 1 and 0.02 <= record["reference_s"] < 1
    assert abs(record["started_at"] - time.time()) < 5
