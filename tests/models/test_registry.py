"""The suite registry: suites are found in models/suites/, unknown names are explained."""

from __future__ import annotations

import importlib

import pytest

from models import UnknownSuiteError, get_suite, suite_names
from models.base import Suite

SUITES = ("builtin", "dummy", "faults", "bound", "timm", "huggingface", "torchbench")


def test_the_suites_are_discovered_in_their_order():
    assert suite_names() == SUITES


@pytest.mark.parametrize("name", SUITES)
def test_each_suite_module_exposes_its_class_under_its_name(name):
    cls = importlib.import_module(f"models.suites.{name}").SUITE
    assert isinstance(cls, type) and issubclass(cls, Suite)
    assert cls.name == name
    assert type(get_suite(name)) is cls


def test_unknown_suite_names_the_value_and_the_available_suites():
    with pytest.raises(UnknownSuiteError) as caught:
        get_suite("resnet_zoo")
    message = str(caught.value)
    assert "'resnet_zoo'" in message
    assert "available suites: " + ", ".join(SUITES) in message


@pytest.mark.parametrize("name", SUITES)
def test_every_suite_takes_the_shared_keyword_options(name):
    suite = get_suite(name, reduced=True, torchbench_dir="/nonexistent/torchbench")
    assert suite.reduced is True and suite.torchbench_dir == "/nonexistent/torchbench"
