"""Reduced models are an argument of the suites; models/ never reads the environment."""

from __future__ import annotations

import pytest

from models import get_suite
from models.reduced import SMALL_MODELS_ENV, parse_reduced_setting
from models.suites.huggingface import HuggingFaceSuite
from models.suites.timm import TimmSuite


@pytest.mark.parametrize("text", ["1", "true", "TRUE", "Yes", "on", " on "])
def test_parse_accepts_true_values(text):
    assert parse_reduced_setting(text) is True


@pytest.mark.parametrize("text", ["", "0", "false", "False", "no", "OFF"])
def test_parse_accepts_false_values(text):
    assert parse_reduced_setting(text) is False


@pytest.mark.parametrize("text", ["maybe", "2", "tru", "y"])
def test_parse_rejects_other_text_naming_it(text):
    with pytest.raises(ValueError, match=repr(text)):
        parse_reduced_setting(text)


def test_the_runner_reads_this_variable():
    assert SMALL_MODELS_ENV == "EXPERIMENT_RUNNER_SMALL_MODELS"


def test_suites_are_full_size_unless_asked():
    assert not TimmSuite().reduced and not HuggingFaceSuite().reduced
    assert TimmSuite(reduced=True).reduced and HuggingFaceSuite(reduced=True).reduced
    assert get_suite("timm", reduced=True).default_batch_size("ghostnet_100") == 4


def test_the_environment_is_not_read(monkeypatch):
    monkeypatch.setenv(SMALL_MODELS_ENV, "1")
    for name in ("timm", "huggingface"):
        assert get_suite(name).reduced is False
    assert get_suite("timm").default_batch_size("ghostnet_100") == 512
