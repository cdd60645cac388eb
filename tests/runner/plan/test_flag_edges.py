"""Flags at their edges (issue 54): --jobs bounded before anything is allocated (defect 12), a
-k pattern that backtracks without end refused by name (defect 16), a -k that matches nothing
among several named, and --help that says each default once and the right way round."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import time

import pytest

from models import get_suite
from runner.plan.matrix import MatrixError, select_models
from runner.plan.parser import MAX_JOBS, build_parser

#: Polynomial backtracking of degree 7 over a failing match: years on 'transformer_block'
#: with Python's re.
BACKTRACKING = r"^(.*?)*(.*?)*(.*?)*(.*?)*(.*?)*(.*?)*(.*?)*\d$"


def parse_error(capsys, *flags: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["--accelerator=cpu", *flags])
    assert exit_.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("jobs", ["99999999999", "2000000000", str(MAX_JOBS + 1)])
def test_jobs_beyond_the_bound_are_refused_at_once_naming_the_value(capsys, jobs):
    started = time.monotonic()
    error = parse_error(capsys, f"--jobs={jobs}")
    assert f"'{jobs}' must be at most {MAX_JOBS}" in error and "--jobs" in error
    assert len(error.strip().splitlines()) == 1
    assert time.monotonic() - started < 1.0
    assert build_parser().parse_args([f"--jobs={MAX_JOBS}"]).jobs == MAX_JOBS


@pytest.mark.e2e
def test_a_pattern_that_backtracks_without_end_is_refused_by_name():
    # Python's re took years on it: the planner hung until it was killed. In a process of
    # its own, so that a regression fails on its timeout rather than hanging the suite.
    code = ("from models import get_suite; from runner.plan.matrix import select_models, "
            "MatrixError\ntry:\n select_models(get_suite('builtin'), [r'%s'], [])\n"
            "except MatrixError as error:\n print(error)" % BACKTRACKING)
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("matching the pattern hung the planner")
    assert done.returncode == 0, done.stderr
    assert repr(BACKTRACKING) in done.stdout and "backtracks" in done.stdout
    assert "transformer_block" in done.stdout


def test_a_filter_that_matches_nothing_among_several_is_named(caplog):
    with caplog.at_level(logging.WARNING):
        names = select_models(get_suite("builtin"), ["^mlp$", "^mpl$"], [])
    assert names == ["mlp"]
    assert "--filter '^mpl$' matches no model of suite 'builtin'" in caplog.text
    assert "'^mlp$'" not in caplog.text
    with pytest.raises(MatrixError, match="no model of suite"):
        select_models(get_suite("builtin"), ["^mpl$"], [])


def test_patterns_keep_their_meaning():
    suite = get_suite("builtin")
    assert select_models(suite, ["MLP", "^c"], []) == ["mlp", "cnn"]
    assert select_models(suite, [], ["_block$"]) == ["mlp", "cnn"]
    with pytest.raises(MatrixError, match="not a valid regular expression"):
        select_models(suite, ["(unclosed"], [])


def test_help_gives_each_default_once_and_never_backwards():
    text = re.sub(r"\s+", " ", build_parser().format_help())
    assert "(default 0: never) (default" not in text
    assert not re.search(r"\(default[^)]*\) \(default", text)
    flag = text.index("--disable-fp16-bf16-reduction-math-sdp full-precision")
    assert "(default: True)" not in text[flag:flag + 250]
    assert "--repeat REPEAT" in text and "(default: 10)" in text  # values keep theirs
