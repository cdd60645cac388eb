"""The server pool (--server-pool): servers forked from a template that outlives its runner,
serving each runner as a server of its own would."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from runner.run.process.forkserver_client import ForkServer, ForkServerError, ForkServers
from backends.runtimes.inductor_host import COMPILER_MODULE, PROBE_OUTCOME_VARIABLES
from runner.run.process.forkserver_pool import template_name
from tests.conftest import PROJECT_ROOT, probe_as_runners_key_it
from tests.runner.run.process.test_forkserver import environment, probe_state, run_probe

pytestmark = pytest.mark.e2e


def templates(pool: Path) -> dict[str, int]:
    """The pool's running templates: name to pid."""
    return {path.stem: int(path.read_text()) for path in pool.glob("*.pid")}


def wait_until(condition, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def end_all(folder: Path) -> None:
    for pid in templates(folder).values():
        os.kill(pid, signal.SIGTERM)


@pytest.fixture
def pool(tmp_path):
    """A pool of the test's own (its templates are the test's to count and end)."""
    folder = tmp_path / "pool"
    yield folder
    end_all(folder)


@pytest.fixture(scope="module")
def shared_pool(tmp_path_factory):
    """A pool for the tests that only need a template of the usual environment (each a few
    seconds of importing torch)."""
    folder = tmp_path_factory.mktemp("shared") / "pool"
    yield folder
    end_all(folder)


def test_servers_of_one_key_are_forks_of_one_template_and_serve_the_runners_environment(
        shared_pool, tmp_path):
    pool = shared_pool
    first = ForkServer([], environment(TMPDIR=str(tmp_path / "first")), pool=pool)
    second = ForkServer([], environment(TMPDIR=str(tmp_path / "second")), pool=pool)
    try:
        # TMPDIR is the runner's own: one template serves both.
        template = templates(pool)[template_name(pool, [], environment())]
        assert first.pooled and second.pooled
        assert first.info["template"] == second.info["template"] == template
        assert len({first.pid, second.pid, template}) == 3
        assert psutil.Process(first.pid).ppid() == template
        # Each child sees its own runner's environment, its temporary folder included,
        # not the template's (the pool's tmp folder).
        (tmp_path / "child").mkdir()
        code, output = run_probe(second, tmp_path / "child", FORK_PROBE="seen",
                                 TMPDIR=str(tmp_path / "child"), RAY_TMPDIR="/tmp/ray-seen")
        assert code == 0
        state = probe_state(output)
        assert state["variables"]["FORK_PROBE"] == "seen"
        assert state["variables"]["RAY_TMPDIR"] == "/tmp/ray-seen"
        assert state["tempdir"] == str(tmp_path / "child")
        assert state["pgid"] == state["pid"] not in (second.pid, template)
        assert state["frozen_objects"] > 0  # forked from the template's preloaded objects
    finally:
        first.close()
        second.close()
    assert gone(first.pid) and gone(second.pid)
    assert not gone(template)  # the template outlives its servers


def test_the_projects_modules_are_imported_by_each_server_and_leave_the_template_shared(
        shared_pool, tmp_path):
    # A suite's builder module is the project's: the sweeps of two suites (or of none) fork
    # from one template, each server importing its own before its first child.
    own = "core.files.bisect_log"
    plain = ForkServer([], environment(), pool=shared_pool)
    with_own = ForkServer([own], environment(), pool=shared_pool)
    try:
        assert with_own.info["template"] == plain.info["template"]
        loaded = {}
        for server in (plain, with_own):
            code, output = run_probe(server, tmp_path, f"loaded={own}")
            assert code == 0, output
            loaded[server is with_own] = probe_state(output)["loaded"][own]
        assert loaded == {False: False, True: True}
    finally:
        plain.close()
        with_own.close()
    before = templates(shared_pool)
    with pytest.raises(ForkServerError, match="could not preload .*tests.fixtures.no_such_module"):
        ForkServer(["tests.fixtures.no_such_module"], environment(), pool=shared_pool)
    assert templates(shared_pool) == before


def test_another_environment_gets_another_template(shared_pool, caplog):
    servers = ForkServers(pool=shared_pool)
    try:
        servers.server_for([], environment())
        before = templates(shared_pool)
        servers.server_for([], environment(TMPDIR="/elsewhere"))  # per-runner: the same
        assert templates(shared_pool) == before
        # Read by nothing at import: a Ray worker's, the proxies, the shell's, the login
        # session's (another SSH connection, terminal, pane), pytest's.
        servers.server_for([], environment(RAY_TMPDIR="/tmp/ray-of-a-test",
                                           https_proxy="http://127.0.0.1:9",
                                           _="/usr/bin/time", PWD="/elsewhere",
                                           OLDPWD="/before", SHLVL="3",
                                           SSH_CLIENT="127.0.0.1 50022 22",
                                           SSH_CONNECTION="127.0.0.1 50022 127.0.0.1 22",
                                           SSH_TTY="/dev/pts/7", XDG_SESSION_ID="41",
                                           TMUX_PANE="%3",
                                           PYTEST_CURRENT_TEST="test_x (call)"))
        assert templates(shared_pool) == before
        caplog.set_level(logging.INFO, logger="runner.run.process.forkserver_pool")
        servers.server_for([], environment(FORK_PROBE="another"))
        assert len(templates(shared_pool)) == len(before) + 1
        # The runner says why: what the running template of the same modules differs in.
        started = [r.getMessage() for r in caplog.records if "template for" in r.getMessage()]
        assert started == ["server pool: a template for no modules starts (the nearest running "
                           "template of these modules differs in: FORK_PROBE)"]
        (new,) = set(templates(shared_pool)) - set(before)
        key = json.loads((shared_pool / f"{new}.key").read_text())
        assert "FORK_PROBE" in key["variables"] and "another" not in json.dumps(key)
    finally:
        servers.close()


def test_the_probes_outcomes_reach_each_server_of_one_compiling_template(shared_pool, tmp_path):
    # A compiling sweep's runner is given the probe's outcomes for inductor, an eager or a
    # CUDA sweep's none: both fork from one template, and each server holds its runner's.
    outcomes = probe_as_runners_key_it().child_environment
    if set(outcomes) != PROBE_OUTCOME_VARIABLES:
        pytest.skip("this host's vector-ISA checks did not all pass: the probe gives none")
    servers = ForkServers(pool=shared_pool)
    try:
        given = servers.server_for([COMPILER_MODULE], environment(**outcomes))
        plain = servers.server_for([COMPILER_MODULE], environment())
        assert given.pid != plain.pid and given.info["template"] == plain.info["template"]
        seen = {}
        for name, server, variables in (("given", given, outcomes), ("plain", plain, {})):
            code, output = run_probe(server, tmp_path, "isa", **variables)
            assert code == 0, output
            state = probe_state(output)
            seen[name] = (state["vec_isa_ok"], state["isa_checks_answered"])
        assert seen == {"given": (True, True), "plain": (None, False)}
    finally:
        servers.close()


def test_a_pool_folder_that_cannot_be_made_leaves_the_runner_its_own_servers(tmp_path, caplog):
    # The pool is on by default, in the user's cache folder: one that is a file, or not
    # writable, must not stop a sweep.
    (tmp_path / "cache").write_text("")
    servers = ForkServers(pool=tmp_path / "cache" / "servers")
    try:
        server = servers.server_for([], environment())
        assert not server.pooled and server.info["pid"] == server.pid
        assert "cache/servers cannot be used: Not a directory" in caplog.text
        assert "this runner starts fork servers of its own" in caplog.text
    finally:
        servers.close()


def test_a_template_ends_when_a_file_it_loaded_changes_and_a_fresh_one_serves(pool, tmp_path):
    library = tmp_path / "library"
    library.mkdir()
    module = library / "pool_preloaded.py"
    module.write_text("VALUE = 1\n")
    variables = environment(PYTHONPATH=f"{PROJECT_ROOT}{os.pathsep}{library}")
    old = ForkServer(["pool_preloaded"], variables, pool=pool)
    old.close()
    (name, stale), = templates(pool).items()
    module.write_text("VALUE = 2  # changed\n")
    fresh = ForkServer(["pool_preloaded"], variables, pool=pool)
    try:
        assert fresh.info["template"] != stale
        assert wait_until(lambda: gone(stale))
        assert templates(pool) == {name: fresh.info["template"]}
        assert "pool_preloaded.py changed since it was loaded" in (pool / f"{name}.log").read_text()
    finally:
        fresh.close()


#: A runner of a copy of the project: asks the pool for a server, prints its template's pid.
COPY_RUNNER = """
import sys
from runner.run.process.forkserver_client import ForkServer
server = ForkServer([], dict(__import__("os").environ), pool=sys.argv[1])
print(server.info["template"], flush=True)
server.close()
"""


def test_a_project_copied_again_keeps_its_template_and_a_changed_one_gets_a_fresh_one(
        pool, tmp_path):
    """A checkout copied afresh (new times, the same content: a GPU host that receives the
    project for each command) keeps its template; a project file whose content changed ends
    it, as any changed file does."""
    copy = tmp_path / "project"
    for package in ("api", "backends", "bisection", "child", "core", "models", "observers",
                    "reports", "runner", "verifier"):
        shutil.copytree(PROJECT_ROOT / package, copy / package)
    variables = environment(PYTHONPATH=str(copy))

    def template_of_a_runner() -> int:
        done = subprocess.run([sys.executable, "-c", COPY_RUNNER, str(pool)], cwd=copy,
                              env=variables, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return int(done.stdout.split()[-1])

    first = template_of_a_runner()
    later = time.time() + 60
    for path in copy.rglob("*.py"):
        path.write_bytes(path.read_bytes())
        os.utime(path, (later, later))
    assert template_of_a_runner() == first
    worker = copy / "child" / "worker.py"
    worker.write_text(worker.read_text() + "# changed\n")
    fresh = template_of_a_runner()
    assert fresh != first and wait_until(lambda: gone(first))
    log = "".join(path.read_text() for path in pool.glob("*.log"))
    assert f"{worker} changed since it was loaded" in log


def test_a_project_file_is_judged_by_its_content_where_only_its_time_moved(tmp_path,
                                                                         monkeypatch):
    """In the template itself: a new time alone is no change (and is kept), the same size
    with other content is one, and a library's file is judged by its time and size."""
    import importlib.util

    from runner.run.process import forkserver_pool

    monkeypatch.setattr(forkserver_pool, "PROJECT_ROOT", tmp_path / "project")
    paths = {}
    for name, folder in (("pool_own_module", "project"), ("pool_library_module", "library")):
        path = tmp_path / folder / f"{name}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text("VALUE = 1\n")
        spec = importlib.util.spec_from_file_location(name, path)
        monkeypatch.setitem(sys.modules, name, importlib.util.module_from_spec(spec))
        paths[folder] = path
    loaded = forkserver_pool._loaded_files()
    files = {str(path): loaded[str(path)] for path in paths.values()}
    own, library = paths["project"], paths["library"]
    assert files[str(own)].digest is not None and files[str(library)].digest is None
    later = time.time() + 60
    os.utime(own, (later, later))
    assert forkserver_pool._changed(files) is None
    assert files[str(own)].mtime_ns == own.stat().st_mtime_ns
    own.write_text("VALUE = 2\n")
    os.utime(own, (later + 1, later + 1))
    assert forkserver_pool._changed(files) == str(own)
    own.write_text("VALUE = 1\n")
    os.utime(own, (later + 2, later + 2))
    assert forkserver_pool._changed(files) is None
    os.utime(library, (later, later))
    assert forkserver_pool._changed(files) == str(library)


RUNNER = """
import sys, time
from runner.run.process.forkserver_client import ForkServer
from tests.runner.run.process.test_forkserver import environment
server = ForkServer([], environment(), pool=sys.argv[1])
child = server.start("tests.fixtures.fork_children", ["fork_probe", "sleep"], environment(),
                     sys.argv[2])
print(server.pid, child.pid, flush=True)
time.sleep(600)
"""


def test_a_pooled_server_and_its_children_end_with_their_runner(shared_pool, tmp_path):
    pool = shared_pool
    runner = subprocess.Popen([sys.executable, "-c", RUNNER, str(pool), str(tmp_path)],
                              cwd=PROJECT_ROOT, stdout=subprocess.PIPE, text=True,
                              env=environment())
    try:
        server, child = (int(pid) for pid in runner.stdout.readline().split())
        assert not gone(server) and not gone(child)
    finally:
        runner.kill()
        runner.wait()
    assert wait_until(lambda: gone(server) and gone(child))
    template = templates(pool)[template_name(pool, [], environment())]
    assert not gone(template)


def test_removing_the_pool_folder_ends_its_templates(pool):
    ForkServer([], environment(), pool=pool).close()
    (template,) = templates(pool).values()
    for path in pool.rglob("*"):
        if path.is_file():
            path.unlink()
    for path in sorted(pool.rglob("*"), reverse=True):
        path.rmdir()
    pool.rmdir()
    assert wait_until(lambda: gone(template))


def test_a_full_pool_ends_its_least_recently_used_template(pool, monkeypatch):
    from runner.run.process import forkserver_pool

    monkeypatch.setattr(forkserver_pool, "MAX_TEMPLATES", 2)
    for value in ("first", "second"):
        ForkServer([], environment(FORK_PROBE=value), pool=pool).close()
    first, second = (template_name(pool, [], environment(FORK_PROBE=value))
                     for value in ("first", "second"))
    old, evicted = templates(pool)[first], templates(pool)[second]
    ForkServer([], environment(FORK_PROBE="first"), pool=pool).close()  # used again: newest
    ForkServer([], environment(FORK_PROBE="third"), pool=pool).close()
    assert wait_until(lambda: gone(evicted))
    assert not gone(old)
    assert set(templates(pool)) == {first, template_name(pool, [], environment(FORK_PROBE="third"))}
    assert templates(pool)[first] == old


def test_plain_folders_on_pythonpath_share_a_template_and_each_child_imports_from_its_own(
        shared_pool, tmp_path):
    """The points of a bisection: each runner has its commit's tree first on PYTHONPATH.
    Trees that hold nothing the template imported share its template, and each server's
    children import the model from their own runner's tree; a folder that holds a module
    the template imported (here a copy of the standard library's json) keys one of its own."""
    pool = shared_pool
    servers, values = [], {}
    try:
        for commit in (1, 2):
            tree = tmp_path / f"commit-{commit}"
            tree.mkdir()
            (tree / "pointmodel.py").write_text(f"VALUE = {commit}\n")
            server = ForkServer([], environment(PYTHONPATH=f"{tree}{os.pathsep}{PROJECT_ROOT}"),
                                pool=pool)
            servers.append(server)
            (tmp_path / f"child-{commit}").mkdir()
            code, output = run_probe(server, tmp_path / f"child-{commit}", "import=pointmodel",
                                     PYTHONPATH=f"{tree}{os.pathsep}{PROJECT_ROOT}")
            assert code == 0, output
            values[commit] = probe_state(output)["imported"]
        assert servers[0].info["template"] == servers[1].info["template"]
        assert {commit: value["value"] for commit, value in values.items()} == {1: 1, 2: 2}
        assert values[1]["file"] == str(tmp_path / "commit-1" / "pointmodel.py")
        before = set(templates(pool))
        shadow = tmp_path / "shadow"
        shutil.copytree(Path(json.__file__).parent, shadow / "json")
        servers.append(ForkServer([], environment(PYTHONPATH=f"{shadow}{os.pathsep}{PROJECT_ROOT}"),
                                  pool=pool))
        assert servers[2].info["template"] not in {servers[0].info["template"]}
        assert len(set(templates(pool)) - before) == 1
    finally:
        for server in servers:
            server.close()


def test_a_runner_on_a_fresh_host_starts_its_template_while_the_probe_runs(pool, tmp_path):
    """A fresh host (no probe answer kept): the runner plans against what the host most
    likely is and starts the template its children will fork from beside the probe child,
    not after it; the probe's answer still decides, and that template serves the sweep."""
    from tests.conftest import cli_command, cli_environment

    cache = tmp_path / "cache"
    environment = {**cli_environment(), "XDG_CACHE_HOME": str(cache),
                   "EXPERIMENT_RUNNER_SERVER_POOL": str(pool)}
    done = subprocess.run(
        cli_command(tmp_path / "out", "-k", "^mlp$", "--accelerator=cpu", "--dynamo=None",
                    "--xla=None", "--torch-xla2=None", "--test=eval", "--repeat=2",
                    "--warmup=1"),
        capture_output=True, text=True, env=environment, timeout=300)
    assert done.returncode == 0, done.stderr
    (line,) = [json.loads(text) for text in (tmp_path / "out" / "results.jsonl").read_text()
               .splitlines()]
    assert line["status"] == "ok"
    # The answer is kept (once the probe child has ended) under one path or two.
    answered = min(path.stat().st_mtime for path in (cache / "experiment-runner" / "host")
                   .glob("*.json"))
    (pid,) = templates(pool).values()  # the one it started is the one it used
    started = psutil.Process(pid).create_time() - process_clock_offset()
    assert started < answered - 0.5, "the template started after the probe answered"
    assert "started 1 server template(s) while the probe runs" in done.stderr


def process_clock_offset() -> float:
    """How far a process's start time, as psutil reads it (the boot time plus clock ticks),
    lies from the wall clock here: a process started now, less the time now."""
    before = time.time()
    process = subprocess.Popen(["sleep", "5"])
    try:
        return psutil.Process(process.pid).create_time() - before
    finally:
        process.kill()
        process.wait()
