"""The reduced-models switch: explicit argument first, then EXPERIMENT_RUNNER_SMALL_MODELS."""

from __future__ import annotations

import pytest

from models.suites.huggingface import HuggingFaceSuite
from models.reduced import SMALL_MODELS_ENV, reduced_requested
from models.suites.timm import TimmSuite


@pytest.mark.parametrize("value, expected", [("1", True), ("true", True), ("0", False), ("", False)])
def test_environment_value(value, expected):
    assert reduced_requested(None, {SMALL_MODELS_ENV: value}) is expected


def test_argument_wins_over_environment():
    assert reduced_requested(False, {SMALL_MODELS_ENV: "1"}) is False
    assert reduced_requested(True, {}) is True


def test_bad_value_is_named():
    with pytest.raises(ValueError, match="maybe"):
        reduced_requested(None, {SMALL_MODELS_ENV: "maybe"})


def test_suites_read_the_environment(monkeypatch):
    monkeypatch.setenv(SMALL_MODELS_ENV, "1")
    assert TimmSuite().reduced and HuggingFaceSuite().reduced
    monkeypatch.delenv(SMALL_MODELS_ENV)
    assert not TimmSuite().reduced and not HuggingFaceSuite().reduced
