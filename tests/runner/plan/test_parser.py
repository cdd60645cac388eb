"""runner/plan/parser.py: the how-to-measure flags from RunSettings, and the typed sweep."""

from __future__ import annotations

import dataclasses
import re
import time

import pytest

from core.config import RunSettings, knobs
from runner.plan.options import OutputOptions, ScaleOptions
from runner.plan.parser import (MAX_JOBS, UsageError, build_parser, run_settings, scale_options,
                                sweep_flags)
from tests.conftest import COMPILE_CACHE_VARIABLE, SERVER_POOL_VARIABLE


def _parse(*flags):
    return build_parser().parse_args(["--accelerator=cpu", *flags])


def test_no_flag_gives_the_settings_declared_defaults(monkeypatch):
    monkeypatch.delenv(COMPILE_CACHE_VARIABLE, raising=False)
    assert run_settings(_parse()) == RunSettings()


#: The folder flags that fall back on a variable: flag, variable, and what the parsed flags
#: give for it.
FOLDER_FLAGS = [
    pytest.param("--compile-cache", COMPILE_CACHE_VARIABLE,
                 lambda args: run_settings(args).compile_cache, id="compile-cache"),
    pytest.param("--server-pool", SERVER_POOL_VARIABLE,
                 lambda args: scale_options(args).server_pool, id="server-pool"),
]
#: What each flag of FOLDER_FLAGS gives where neither it nor its variable is set, under the
#: user's cache folder CACHE: the compile caches are each experiment's own, the server
#: pool is the user's.
FOLDER_DEFAULTS = {"--compile-cache": lambda cache: None,
                   "--server-pool": lambda cache: str(cache / "experiment-runner" / "servers")}


@pytest.mark.parametrize("flag, variable, folder_of", FOLDER_FLAGS)
def test_a_folder_comes_from_the_flag_else_its_variable(monkeypatch, tmp_path, flag, variable,
                                                        folder_of):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv(variable, str(tmp_path / "from-variable"))
    assert folder_of(_parse()) == str(tmp_path / "from-variable")
    assert folder_of(_parse(f"{flag}={tmp_path}/flag")) == str(tmp_path / "flag")
    assert folder_of(_parse(f"{flag}=None")) is None
    monkeypatch.chdir(tmp_path)
    assert folder_of(_parse(f"{flag}=caches")) == str(tmp_path / "caches")
    monkeypatch.setenv(variable, "None")
    assert folder_of(_parse()) is None
    monkeypatch.delenv(variable)
    assert folder_of(_parse()) == FOLDER_DEFAULTS[flag](tmp_path / "cache")


@pytest.mark.parametrize("flag, variable, folder_of", FOLDER_FLAGS)
def test_a_folder_that_is_a_file_is_refused(monkeypatch, tmp_path, capsys, flag, variable,
                                            folder_of):
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit) as stop:
        _parse(f"{flag}={tmp_path / 'file'}")
    assert stop.value.code == 2
    assert flag in capsys.readouterr().err
    monkeypatch.setenv(variable, str(tmp_path / "file"))
    with pytest.raises(UsageError, match=f"{variable}: .*is not a folder"):
        folder_of(_parse())


def test_every_setting_with_a_flag_is_set_by_it():
    settings = run_settings(_parse("--repeat=4", "--iterations-per-run=2", "--warmup=0",
                                   "--randomize-input", "--verify-iterations=3", "--threads=2",
                                   "--no-paired-timing", "--pure-wall-time",
                                   "--no-reference-workload", "--remeasure-slow=1", "--slow-wait=7",
                                   "--timing-core=any", "--verify", "--no-device-busy",
                                   "--compile-cache=/caches"))
    assert {spec.name for spec, _ in knobs()} == {
        f.name for f in dataclasses.fields(RunSettings)} - {"observe"}
    assert dataclasses.replace(settings, observe={}) == RunSettings(
        repeat=4, iterations_per_run=2, warmup=0, randomize_input=True, verify=True,
        verify_iterations=3, threads=2, paired=False, pure_wall_time=True,
        reference_workload=False, remeasure_slow=1, slow_wait=7, timing_core="any", device_busy=False,
        compile_cache="/caches")


def test_verify_only_implies_verify():
    settings = run_settings(_parse("--verify-only"))
    assert settings.verify and settings.verify_only


@pytest.mark.parametrize("flag, message", [("--repeat=0", "must be at least 1"),
                                           ("--warmup=-1", "must be at least 0"),
                                           ("--timing-core=slowest", "invalid choice"),
                                           ("--experiments-per-gpu=0", "must be at least 1"),
                                           ("--experiments-per-gpu=many", "an integer")])
def test_a_bad_setting_is_refused_naming_the_flag(flag, message, capsys):
    with pytest.raises(SystemExit) as stop:
        _parse(flag)
    assert stop.value.code == 2
    error = capsys.readouterr().err
    assert flag.split("=")[0] in error and message in error


def test_the_sweep_gets_typed_values_not_the_flags(tmp_path, monkeypatch):
    monkeypatch.delenv(SERVER_POOL_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    what, settings, output, scale = sweep_flags(_parse(
        "--repeat=2", f"--output-dirname={tmp_path}", "--no-resume", "--jobs=2",
        "--memory-limit-mb=1024", "-k", "mlp"))
    assert what.suite_name == "builtin" and what.single is None and what.request.filters == ("mlp",)
    assert settings.repeat == 2
    assert output == OutputOptions(dirname=str(tmp_path), resume=False,
                                   memory_limit_bytes=1024 * 2**20)
    assert scale == ScaleOptions(jobs=2, start_method=scale.start_method,
                                 server_pool=str(tmp_path / "cache" / "experiment-runner" / "servers"))


@pytest.mark.parametrize("flags, expected", [
    ((), None), (("--experiments-per-gpu=auto",), None), (("--experiments-per-gpu=2",), 2)])
def test_experiments_per_gpu_is_auto_unless_a_count_is_given(flags, expected):
    assert sweep_flags(_parse(*flags))[3].per_gpu == expected


@pytest.mark.parametrize("flags, message", [
    (("--model-config={}",), "go together"),
    (("--ray-tasks=2",), "--ray-tasks=2 applies to --executor=ray only"),
    (("--executor=ray", "--jobs=2"), "--jobs=2 does not apply to --executor=ray"),
    (("--executor=ray", "--experiments-per-gpu=2"),
     "--experiments-per-gpu=2 does not apply to --executor=ray"),
    (("--memory-limit-mb=10",), "below the 768 MiB"),
])
def test_flags_that_do_not_go_together_are_refused(flags, message):
    with pytest.raises(UsageError, match=message):
        sweep_flags(_parse(*flags))


# Flags at their edges (issue 54): --jobs bounded before anything is allocated (defect 12),
# and --help that says each default once and the right way round.
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


def test_help_gives_each_default_once_and_never_backwards():
    text = re.sub(r"\s+", " ", build_parser().format_help())
    assert "(default 0: never) (default" not in text
    assert not re.search(r"\(default[^)]*\) \(default", text)
    flag = text.index("--disable-fp16-bf16-reduction-math-sdp full-precision")
    assert "(default: True)" not in text[flag:flag + 250]
    assert "--repeat REPEAT" in text and "(default: 10)" in text  # values keep theirs


def test_a_folder_flag_of_an_unknown_users_home_is_the_folder_as_written(tmp_path, monkeypatch):
    from runner.plan.parser import folder_parser
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    parse = folder_parser("--compile-cache")
    assert parse("~/cache") == str(tmp_path / "home" / "cache")
    assert parse("~no-such-user-here0/cache") == str(tmp_path / "~no-such-user-here0" / "cache")
