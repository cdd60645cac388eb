"""The host probe: a child that imports torch, and its answer kept for a day."""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from backends.runtimes.inductor_host import ISA_CHECKS_VARIABLE
from runner.plan import probe
from runner.plan.probe import (PROBE_CACHE_SECONDS, answer_path, import_roots, probe_cache_path,
                               probe_host, probe_key)


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def own_cache_holding_the_checks(tmp_path, monkeypatch):
    """own_cache, holding the vector-ISA checks' outcome that the tests' shared cache keeps
    (made there first where no probe had made it yet): a probe asked with the checks takes
    it instead of building their programs and loading each in a Python child (about 8
    CPU-s a test). Making the checks is tested where the runner is killed during them,
    and keeping them, with a stand-in, in test_the_vector_isa_checks_are_kept_for_a_day."""
    probe.compiler_checks()
    shared = probe.isa_checks_path()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    own = probe.isa_checks_path()
    own.parent.mkdir(parents=True)
    shutil.copy2(shared, own)
    return tmp_path / "cache"


@pytest.fixture
def counted_probe(monkeypatch):
    """The probe child runs once; every later ask is counted and given a copy of its answer
    (the first ask checks the child; the later ones are about when the runner asks)."""
    from runner.plan import probe

    asked: list[dict] = []
    real = probe.run_probe

    def run_probe(timeout: float, with_compiler_checks: bool = True,
                  while_probing=None) -> dict:
        asked.append(real(timeout, with_compiler_checks, while_probing) if not asked
                     else json.loads(json.dumps(asked[0])))
        return asked[-1]

    monkeypatch.setattr(probe, "run_probe", run_probe)
    return asked


@pytest.mark.e2e
def test_the_answer_is_kept_and_used_until_it_is_a_day_old(own_cache_holding_the_checks,
                                                          counted_probe):
    fresh = probe_host()
    assert len(counted_probe) == 1
    assert fresh.torch_version and fresh.torch_error is None
    if platform.machine() == "x86_64" and shutil.which("g++"):
        # Every vector ISA an x86 CPU lists builds with g++: inductor's checks are made once
        # for the host (here, kept from the tests' shared cache), and no child repeats them
        # (tests/backends/test_inductor_host.py).
        assert set(fresh.child_environment) == {"TORCHINDUCTOR_VEC_ISA_OK", ISA_CHECKS_VARIABLE}
        assert fresh.child_environment["TORCHINDUCTOR_VEC_ISA_OK"] == "1"
        outcomes = json.loads(fresh.child_environment[ISA_CHECKS_VARIABLE])
        assert outcomes and all(outcomes.values())
    path = answer_path()
    assert path.is_relative_to(own_cache_holding_the_checks / "experiment-runner" / "host")
    kept = json.loads(path.read_text())
    assert kept["torch_version"] == fresh.torch_version
    kept["torch_version"] = "0.0.0+cached"
    path.write_text(json.dumps(kept))
    assert probe_host().torch_version == "0.0.0+cached"  # no child asked
    assert len(counted_probe) == 1
    assert probe_host(use_cache=False).torch_version == fresh.torch_version
    assert len(counted_probe) == 2
    old = time.time() - PROBE_CACHE_SECONDS - 60
    path.write_text(json.dumps(kept))
    os.utime(path, (old, old))
    assert probe_host().torch_version == fresh.torch_version  # too old: asked again
    assert len(counted_probe) == 3
    assert json.loads(path.read_text())["torch_version"] == fresh.torch_version


def test_the_key_follows_devices_and_installed_packages(own_cache, monkeypatch, tmp_path):
    key = probe_key()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    assert probe_key() != key
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert probe_key() == key
    packages = tmp_path / "site"
    packages.mkdir()
    monkeypatch.syspath_prepend(str(packages))
    with_folder = probe_key()
    (packages / "newly_installed-1.0.dist-info").mkdir()
    installed = probe_key()
    assert installed != with_folder
    (packages / "newly_installed-1.0.dist-info").rename(packages / "newly_installed-1.1.dist-info")
    upgraded = probe_key()
    assert upgraded != installed  # upgraded
    (packages / "legacy.egg-info").write_text("Metadata-Version: 1.0\nName: legacy\nVersion: 2\n")
    with_egg = probe_key()
    assert with_egg != upgraded
    (packages / "legacy.egg-info").write_text("Metadata-Version: 1.0\nName: legacy\nVersion: 3\n")
    assert probe_key() != with_egg
    (packages / "legacy.egg-info").unlink()
    (packages / "newly_installed-1.1.dist-info").rmdir()
    assert probe_key() == with_folder  # removed


def test_the_key_holds_what_is_installed_not_when_a_folder_changed(own_cache, monkeypatch,
                                                                   tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.syspath_prepend(str(project))
    key = probe_key()
    (project / ".hypothesis").mkdir()  # a file made in the project's folder
    os.utime(project, (time.time() + 5, time.time() + 5))
    assert probe_key() == key
    # The same folders however sys.path and PYTHONPATH spell them: "" for the working
    # folder (`python -c`), a folder listed twice (the runner called in-process).
    monkeypatch.chdir(project)
    monkeypatch.setattr("sys.path", ["", *sys.path])
    assert probe_key() == key
    monkeypatch.setattr("sys.path", [str(project), *sys.path])
    assert probe_key() == key
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(project), str(project)]))
    doubled = probe_key()
    monkeypatch.setenv("PYTHONPATH", str(project))
    assert probe_key() == doubled
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert probe_key() != doubled  # another folder


def test_a_folder_a_library_adds_inside_a_path_entry_leaves_the_key_alone(own_cache, monkeypatch,
                                                                          tmp_path):
    # ray, once imported, puts its thirdparty_files folder (inside site-packages) on sys.path.
    packages = tmp_path / "site"
    (packages / "lib" / "thirdparty_files").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(packages))
    monkeypatch.setattr("runner.plan.probe.site_folders", lambda: [str(packages)])
    key = probe_key()
    monkeypatch.syspath_prepend(str(packages / "lib" / "thirdparty_files"))
    assert probe_key() == key
    # Only folders inside a site folder are left out; the site folder itself, and a project
    # folder that holds a site folder (a .venv inside it), stay in the key.
    assert import_roots(["/a", "/a/b/c", "/ab", "/p", "/p/.venv/site/x"], ["/a", "/p/.venv/site"]) \
        == ["/a", "/ab", "/p"]


def test_the_key_leaves_out_the_folder_torch_puts_on_sys_path_for_itself(monkeypatch, tmp_path):
    # torch._dynamo imports torch's jit template module, which puts a fresh temporary folder
    # of its own on sys.path: a process that imported it keys the probe as the runner does.
    import types

    from runner.plan.probe import TORCH_TEMPLATE_MODULE

    template = tmp_path / "torch-templates"
    template.mkdir()
    monkeypatch.setitem(sys.modules, TORCH_TEMPLATE_MODULE, types.SimpleNamespace(
        INSTANTIATED_TEMPLATE_DIR_PATH=str(template)))
    key = probe_key()  # (this process's own template folder, if any, now counts as any)
    monkeypatch.syspath_prepend(str(template))
    assert probe_key() == key
    other = tmp_path / "project"
    other.mkdir()
    monkeypatch.syspath_prepend(str(other))  # any other folder still counts
    assert probe_key() != key


def test_the_key_follows_the_cpp_compiler(own_cache, monkeypatch, tmp_path):
    key = probe_key()
    compiler = tmp_path / "c++"
    compiler.write_text("#!/bin/sh\n")
    compiler.chmod(0o755)
    monkeypatch.setenv("CXX", str(compiler))
    with_ours = probe_key()
    assert with_ours != key
    os.utime(compiler, (time.time() + 5, time.time() + 5))  # the compiler upgraded
    assert probe_key() != with_ours


def test_the_probes_variables_survive_the_cache(own_cache):
    from core.host.machine import HostCapabilities

    kept = {"torch_version": "2.9.0", "child_environment": {"TORCHINDUCTOR_VEC_ISA_OK": "1"}}
    assert HostCapabilities.from_dict(json.loads(json.dumps(kept))).child_environment == {
        "TORCHINDUCTOR_VEC_ISA_OK": "1"}
    assert HostCapabilities.from_dict({"torch_version": "2.9.0"}).child_environment == {}


def test_the_vector_isa_checks_are_kept_for_a_day_apart_from_the_answer(own_cache, monkeypatch):
    """A probe asked again for another reason (another key) takes the kept outcome of the
    checks instead of building their programs again; an old or unreadable one is made anew."""
    made = []
    monkeypatch.setattr(probe, "made_compiler_checks",
                        lambda: made.append(1) or {"TORCHINDUCTOR_VEC_ISA_OK": str(len(made))})
    assert probe.compiler_checks() == {"TORCHINDUCTOR_VEC_ISA_OK": "1"}
    kept = probe.isa_checks_path()
    assert kept.is_relative_to(own_cache / "experiment-runner" / "host") and kept.is_file()
    assert probe.compiler_checks() == {"TORCHINDUCTOR_VEC_ISA_OK": "1"} and len(made) == 1
    old = time.time() - PROBE_CACHE_SECONDS - 60
    os.utime(kept, (old, old))
    assert probe.compiler_checks() == {"TORCHINDUCTOR_VEC_ISA_OK": "2"}  # a day old: made again
    kept.write_text('{"TORCHINDUCTOR_VEC_ISA_OK": 1}')  # not a map of strings
    assert probe.compiler_checks() == {"TORCHINDUCTOR_VEC_ISA_OK": "3"}
    assert probe.compiler_checks() == {"TORCHINDUCTOR_VEC_ISA_OK": "3"} and len(made) == 3


@pytest.mark.e2e
def test_a_folder_holding_none_of_the_probes_modules_shares_the_answer(own_cache, counted_probe,
                                                                       monkeypatch, tmp_path):
    """A bisected commit's tree on PYTHONPATH (a model's package) asks no probe of its own;
    a folder holding a module the probe imported (torch) does, and its answer is kept apart."""
    first = probe_host(with_compiler_checks=False)
    assert len(counted_probe) == 1 and "torch" in first.top_level_modules

    def on_path(folder: Path, package: str) -> None:
        (folder / package).mkdir(parents=True)
        (folder / package / "__init__.py").write_text("")
        monkeypatch.syspath_prepend(str(folder))
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
            [str(folder), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]))

    for commit in ("commit-1", "commit-2"):
        on_path(tmp_path / commit, "mymodel")
        assert probe_host(with_compiler_checks=False).torch_version == first.torch_version
        assert len(counted_probe) == 1, commit  # answered from the cache
    on_path(tmp_path / "torch-checkout", "torch")
    probe_host(with_compiler_checks=False)
    assert len(counted_probe) == 2
    kept = answer_path()
    assert kept.exists() and kept != probe_cache_path([str(tmp_path / "torch-checkout")])
    probe_host(with_compiler_checks=False)
    assert len(counted_probe) == 2  # its own answer, kept


@pytest.mark.e2e
def test_a_failed_probe_is_reported_and_never_kept(own_cache, monkeypatch, tmp_path):
    broken = tmp_path / "broken"
    (broken / "torch").mkdir(parents=True)
    (broken / "torch" / "__init__.py").write_text("raise ImportError('this torch is broken')\n")
    monkeypatch.setenv("PYTHONPATH", str(broken))
    answer = probe_host()
    assert "this torch is broken" in answer.torch_error
    assert not probe_cache_path().exists()



@pytest.fixture
def stand_in_probe(monkeypatch):
    """run_probe replaced by a stand-in that takes half a second (a probe takes seconds, so
    that others ask while it runs); the threads that ran it, in order."""
    from runner.plan import probe

    ran: list[int] = []

    def run_probe(timeout: float, with_compiler_checks: bool = True,
                  while_probing=None) -> dict:
        ran.append(threading.get_ident())
        time.sleep(0.5)
        return {"python": platform.python_version(), "torch_version": "9.9.9",
                "compiler_checked": with_compiler_checks}

    monkeypatch.setattr(probe, "run_probe", run_probe)
    return ran


def test_runners_that_ask_together_probe_once(own_cache, stand_in_probe):
    """Four askers at once (threads here, runners on a host; the lock is a file lock): one
    probe child, and every asker gets its answer."""
    answers = []
    askers = [threading.Thread(target=lambda: answers.append(probe_host())) for _ in range(4)]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join()
    assert len(stand_in_probe) == 1
    assert [answer.torch_version for answer in answers] == ["9.9.9"] * 4


def test_a_lock_held_too_long_does_not_stop_the_probe(own_cache, stand_in_probe):
    """Another runner holding the lock longer than a probe may take: probe without it."""
    from filelock import FileLock

    path = probe_cache_path()
    path.parent.mkdir(parents=True)
    with FileLock(f"{path}.lock"):
        started = time.monotonic()
        assert probe_host(timeout=0.2).torch_version == "9.9.9"
        assert time.monotonic() - started < 5


@pytest.mark.parametrize("field, value", [
    ("dynamo_backends", "inductor"), ("cuda_device_names", [1]), ("packages", []),
    ("cuda_available", "yes"), ("torch_version", 2), ("child_environment", {"A": 1}),
])
def test_a_cached_answer_of_the_wrong_shape_is_set_aside_and_asked_again(own_cache, caplog,
                                                                         field, value):
    # Issue 43: "dynamo_backends": "inductor" silently dropped inductor from the plan.
    from runner.plan.probe import cached_answer

    path = probe_cache_path()
    path.parent.mkdir(parents=True)
    answer = {"python": "3", "torch_version": "2.9", "dynamo_backends": ["inductor"],
              "packages": {"torch": "2.9"}, "child_environment": {}}
    path.write_text(json.dumps(answer))
    assert cached_answer(path).dynamo_backends == ("inductor",)
    path.write_text(json.dumps({**answer, field: value}))
    assert cached_answer(path) is None
    assert f"the probe's cached answer {path} does not fit its shape ({field}" in caplog.text
    assert not path.exists() and path.with_name(path.name + ".unreadable").exists()


def start_probing_runner(tmp_path: Path, tmpdir: Path) -> tuple[subprocess.Popen, psutil.Process]:
    """A runner that probes (no cached answer), and its probe child once it runs."""
    from tests.conftest import cli_command, cli_environment

    tmpdir.mkdir()
    runner = subprocess.Popen(
        cli_command(tmp_path / "output", "--dry-run", "--no-probe-cache", "-k", "^mlp$"),
        env={**cli_environment(), "TMPDIR": str(tmpdir)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        probes = [child for child in psutil.Process(runner.pid).children()
                  if "runner.plan.probe" in " ".join(child.cmdline())]
        # Well inside the probe: torch imported, inductor's ISA checks begun.
        if probes and any(tmpdir.rglob("experiment-runner-isa-*")):
            return runner, probes[0]
        time.sleep(0.05)
    runner.kill()
    raise AssertionError("the runner never started its probe")


@pytest.mark.e2e
def test_sigterm_during_the_probe_leaves_no_folder_and_no_process(tmp_path, own_cache):
    # Issue 43, defect 6: the probe ran before the guard existed; its folders stayed.
    tmpdir = tmp_path / "tmp"
    runner, probe = start_probing_runner(tmp_path, tmpdir)
    runner.send_signal(signal.SIGTERM)
    _, stderr = runner.communicate(timeout=60)
    assert runner.returncode == 143 and "Traceback" not in stderr, stderr
    assert not probe.is_running() or probe.status() == psutil.STATUS_ZOMBIE
    assert list(tmpdir.iterdir()) == []


@pytest.mark.e2e
def test_a_runner_killed_during_the_probe_takes_its_probe_child_along(tmp_path, own_cache):
    tmpdir = tmp_path / "tmp"
    runner, probe = start_probing_runner(tmp_path, tmpdir)
    runner.kill()
    runner.communicate(timeout=60)
    try:
        probe.wait(timeout=10)
    except psutil.TimeoutExpired:
        probe.kill()
        raise AssertionError("the probe child outlived its killed runner")
    # Its scratch folder is named as the runner's scratch roots: the next runner removes it.
    from runner.run.process.scratch import sweep_stale

    assert [folder.name.startswith("experiment-runner-") for folder in tmpdir.iterdir()] == [True]
    sweep_stale(tmpdir)
    assert list(tmpdir.iterdir()) == []


@pytest.mark.e2e
def test_a_sweep_that_cannot_compile_on_the_cpu_is_probed_without_the_compiler_checks(
        own_cache_holding_the_checks):
    """The checks take seconds (a C++ build and a Python child per vector ISA): a CUDA or an
    eager sweep's probe leaves them out; a later CPU-inductor sweep asks again, with them, and
    its answer then serves both."""
    from runner.plan import probe

    asked: list[bool] = []
    real = probe.run_probe

    def run_probe(timeout: float, with_compiler_checks: bool = True,
                  while_probing=None) -> dict:
        asked.append(with_compiler_checks)
        return real(timeout, with_compiler_checks, while_probing)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(probe, "run_probe", run_probe)
        quick = probe_host(with_compiler_checks=False)
        assert quick.torch_version and not quick.compiler_checked
        assert quick.child_environment == {}
        checked = probe_host(with_compiler_checks=True)  # the cached answer lacks them
        assert checked.compiler_checked and asked == [False, True]
        assert probe_host(with_compiler_checks=False).compiler_checked  # the superset serves
        assert asked == [False, True]


@pytest.mark.parametrize("dimensions, compiles", [
    ({}, True),
    ({"accelerator": ("cuda",)}, False),
    ({"accelerator": ("cpu", "cuda"), "dynamo": ("inductor",)}, True),
    ({"dynamo": ("openxla", "cudagraphs")}, False),
    ({"dynamo": (None, "inductor"), "accelerator": ("cpu",)}, True),
])
def test_only_a_sweep_that_may_compile_with_inductor_on_the_cpu_wants_the_checks(dimensions, compiles):
    assert probe.compiles_on_cpu(dimensions) is compiles
