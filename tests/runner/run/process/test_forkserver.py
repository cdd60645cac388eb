"""Fork servers: preloaded once, children as isolated as fresh interpreters.

That a forked child counts dynamo's compilation as a spawned one does is checked on the
sweep of tests/cli/test_observe_cli.py (its inductor child, and the same experiment spawned)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import psutil
import pytest

from runner.run.process.supervision import kill_tree
from runner.run.process.forkserver_client import (ForkServer, ForkServerError, ForkServers, names_own_folder,
                               server_key)
from tests.conftest import PROJECT_ROOT, cli_environment, probe_as_runners_key_it

CHILDREN = "tests.fixtures.fork_children"  # its main runs the job its first argument names
CUDA_POISON = "tests.fixtures.cuda_poison"


def environment(**extra: str) -> dict[str, str]:
    """The environment the runners of the tests get (cli_environment: one inductor compile
    thread, no per-test variables), the project on PYTHONPATH, and `extra`."""
    variables = cli_environment()
    variables["PYTHONPATH"] = str(PROJECT_ROOT)
    variables["PYTHONUNBUFFERED"] = "1"
    variables.update(extra)
    return variables


@pytest.fixture(scope="module")
def compiler_variables():
    """What the runner's probe hands every child for inductor (runner/plan/probe.py): without
    it each compiling child checks the CPU's vector ISAs again (a C++ build and a Python child
    per ISA, about 8 CPU-seconds), which is not what these tests are about. The probe's kept
    answer, which the runners of the whole test run share (tests/conftest.py), not the checks
    made again for this module (about 7 s of each run of it)."""
    return probe_as_runners_key_it().child_environment


@pytest.fixture(scope="module")
def server():
    server = ForkServer(["torch"], environment())
    yield server
    server.close()


@pytest.fixture(scope="module")
def compiler_family_server(compiler_variables):
    """One server of the compiler family (what the dynamo stacks preload) for the module's
    tests of it, each of which started its own (seconds of importing each). It imports
    inductor's configuration, which reads the probe's variables: it gets them too, as the
    runner's servers do."""
    from backends import get_stack

    preloaded = ForkServer(get_stack("dynamo").preload, environment(**compiler_variables))
    yield preloaded
    preloaded.close()


def run_probe(server, tmp_path, *argv, **variables):
    child = server.start(CHILDREN, ["fork_probe", *argv], environment(**variables), str(tmp_path))
    output = child.stdout.read().decode()
    return child.wait(timeout=120), output


def probe_state(output: str) -> dict:
    return json.loads(next(line for line in output.splitlines() if line.startswith("{")))


@pytest.mark.e2e
def test_the_server_preloads_torch_without_a_device_context_or_dynamo(server):
    state = server.status()
    assert state["modules"] == ["torch"]
    assert state["cuda_initialized"] is False
    assert state["cuda_fork_safe"] is True
    assert "torch._dynamo" not in state["modules"]
    assert state["pid"] == server.pid


@pytest.mark.e2e
def test_a_child_gets_its_own_session_folder_and_environment(server, tmp_path):
    code, output = run_probe(server, tmp_path, "x", FORK_PROBE="seen", CUDA_VISIBLE_DEVICES="3")
    assert code == 0
    state = probe_state(output)
    assert state["pgid"] == state["pid"] != server.pid
    assert state["cwd"] == str(tmp_path)
    assert state["variables"]["FORK_PROBE"] == "seen"
    assert state["variables"]["CUDA_VISIBLE_DEVICES"] == "3"
    assert state["argv"] == ["x"]
    assert state["cuda_bad_fork"] is False
    assert state["platform_answered"]  # the server asked once, for every child


@pytest.mark.e2e
def test_each_child_compiles_with_a_fresh_dynamo_state_into_its_own_cache(server, tmp_path,
                                                                           compiler_variables):
    # One compiling child of this server (torch alone): the server imports no dynamo before
    # or after it, so a second child would start from the same state. Two children of one
    # server, each compiling from zero into its own cache, are the compiler family's test
    # below (the server the runner's dynamo children fork from).
    cache = tmp_path / "inductor"
    code, output = run_probe(server, tmp_path, "compile",
                             TORCHINDUCTOR_CACHE_DIR=str(cache), **compiler_variables)
    assert code == 0, output
    state = probe_state(output)
    assert state["compiled"] == [3.0, 3.0, 3.0]
    assert state["frames_ok"] == 1  # counted from zero in the child
    assert state["inductor_cache_dir"] == str(cache)
    assert cache.is_dir()
    assert server.status()["cuda_initialized"] is False
    assert "torch._dynamo" not in server.status()["modules"]


@pytest.mark.e2e
def test_a_compiler_family_server_has_compiled_nothing_and_its_children_start_afresh(
        compiler_family_server, tmp_path, compiler_variables):
    preloaded = compiler_family_server
    state = preloaded.status()
    assert "torch._dynamo" in state["modules"]
    assert state["dynamo_frames_compiled"] == 0 and state["cuda_initialized"] is False
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        cache = tmp_path / name / "inductor"
        code, output = run_probe(preloaded, tmp_path / name, "compile",
                                 TORCHINDUCTOR_CACHE_DIR=str(cache), **compiler_variables)
        assert code == 0, output
        assert probe_state(output)["frames_ok"] == 1
        assert probe_state(output)["inductor_cache_dir"] == str(cache)
        assert any(cache.iterdir())
    assert preloaded.status()["dynamo_frames_compiled"] == 0


@pytest.mark.e2e
def test_a_compiler_family_server_says_truly_whether_its_children_could_use_cuda(
        compiler_family_server, tmp_path):
    """Inductor asks torch.cuda.is_available() at import: through the CUDA runtime that
    starts the driver, and torch then refuses CUDA in every forked child. The server asks
    through NVML instead where the machine has it (GPU machines), and reports what its
    children would see either way; the executor spawns CUDA children when they could not."""
    preloaded = compiler_family_server
    code, output = run_probe(preloaded, tmp_path, "x")
    assert code == 0, output
    assert preloaded.status()["cuda_fork_safe"] is not probe_state(output)["cuda_bad_fork"]
    assert preloaded.info["cuda_fork_safe"] is preloaded.status()["cuda_fork_safe"]


@pytest.mark.e2e
def test_cuda_experiments_fork_only_from_a_server_whose_children_can_use_cuda(tmp_path):
    servers = ForkServers()
    try:
        assert servers.server_for(["torch"], environment(), cuda=True).info["cuda_fork_safe"]
        with pytest.raises(ForkServerError, match="could not use CUDA"):
            servers.server_for(["torch", CUDA_POISON], environment(), cuda=True)
        poisoned = servers.server_for(["torch", CUDA_POISON], environment())  # CPU children
        assert poisoned.info["cuda_fork_safe"] is False
        code, output = run_probe(poisoned, tmp_path, "x")
        assert code == 0 and probe_state(output)["cuda_bad_fork"] is True
    finally:
        servers.close()


@pytest.mark.e2e
@pytest.mark.parametrize("stack_name, library, untouched", [
    ("xla_lazy", "torch_xla", "xla_runtime_initialized"),
    ("torchax", "jax", "jax_backends_initialized"),
])
def test_an_xla_family_server_holds_no_xla_client_or_device(stack_name, library, untouched):
    from backends import get_stack

    preloaded = ForkServer(get_stack(stack_name).preload,
                           environment(PJRT_DEVICE="CPU", JAX_PLATFORMS="cpu"))
    try:
        state = preloaded.status()
        assert library in state["modules"]
        assert state[untouched] is False
        assert state["cuda_initialized"] is False
        assert state.get("dynamo_frames_compiled", 0) == 0  # torch_xla imports dynamo
    finally:
        preloaded.close()


@pytest.mark.e2e
@pytest.mark.parametrize("xla", [None, "PJRT"])
def test_a_cpu_child_imports_none_of_the_projects_modules_itself(tmp_path, xla):
    """Every module of the project an eager or PJRT child on the CPU needs is in its server
    already (PROJECT_MODULES, the stack's and the suite's preloads): importing one in each
    child cost it 5 to 25 ms on a loaded 2-core machine, and more where bytecode is not
    cached. An inference and a training child of one server (the preload and the
    environment are the stack's, whatever the test)."""
    import dataclasses

    import backends
    import models
    from core.config import ExperimentConfig, ModelConfig, RunSettings
    from core.contract import RESULT_FILE, SPEC_FILE, ChildResult, ChildSpec, Role, read_message, write_message

    experiments = {}
    for test in ("eval", "train"):
        planned = ExperimentConfig("cpu", xla, None, None, test)
        experiments[test] = dataclasses.replace(planned, stack=backends.stack_for(planned).name)
    stack = backends.get_stack(experiments["eval"].stack)
    assert {backends.stack_for(each).name for each in experiments.values()} == {stack.name}
    preloads = {(*stack.preload_for(each), *models.suite_preload("builtin"))
                for each in experiments.values()}
    variables = {json.dumps(environment(**stack.child_environment(each)), sort_keys=True)
                 for each in experiments.values()}
    assert len(preloads) == len(variables) == 1
    preloaded = ForkServer(preloads.pop(), json.loads(variables.pop()))
    try:
        for test, planned in experiments.items():
            folder = tmp_path / test
            folder.mkdir()
            write_message(folder / SPEC_FILE, ChildSpec(
                ModelConfig("builtin", "mlp"), planned, RunSettings(repeat=1, warmup=1),
                Role.TIME, str(folder)))
            child = preloaded.start(CHILDREN, ["worker_imports", str(folder)],
                                    environment(**stack.child_environment(planned)), str(folder))
            output = child.stdout.read().decode()
            assert child.wait(timeout=120) == 0, output
            assert read_message(folder / RESULT_FILE, ChildResult).status.value == "ok", test
            assert probe_state(output) == {"imported": []}, test
    finally:
        preloaded.close()


@pytest.mark.e2e
def test_a_childs_exit_functions_import_nothing(compiler_family_server, tmp_path):
    """torch._dynamo's exit function tabulates its compile times: with `tabulate`, which the
    server imported, not each child at its exit (10 to 17 ms)."""
    child = compiler_family_server.start(CHILDREN, ["exit_probe"], environment(), str(tmp_path))
    output = child.stdout.read().decode()
    assert child.wait(timeout=120) == 0, output
    assert probe_state(output) == {"imported": []}


@pytest.mark.e2e
def test_a_childs_exit_leaves_the_servers_temporary_folders(tmp_path):
    preloaded = ForkServer(["torch", "tests.fixtures.server_folder"],
                           environment(TMPDIR=str(tmp_path)))
    try:
        (folder,) = tmp_path.glob("server-folder-*")
        for _ in range(2):
            child = preloaded.start(CHILDREN, ["exit_probe"], environment(TMPDIR=str(tmp_path)),
                                    str(tmp_path))
            child.stdout.read()
            assert child.wait(timeout=120) == 0
            assert folder.is_dir()
    finally:
        preloaded.close()


@pytest.mark.e2e
def test_a_childs_collections_leave_the_servers_preloaded_objects_alone(server, tmp_path):
    """Frozen in the server: a child's collections would otherwise walk every object of
    torch, touching (and so copying) pages it shares with the server."""
    code, output = run_probe(server, tmp_path)
    assert code == 0 and probe_state(output)["frozen_objects"] > 100_000


@pytest.mark.e2e
def test_exit_statuses_come_back_as_from_a_spawned_child(server, tmp_path):
    assert run_probe(server, tmp_path, "3")[0] == 3
    code, output = run_probe(server, tmp_path, "fail")
    assert code == 1
    assert "RuntimeError: the probe was asked to fail" in output


@pytest.mark.e2e
def test_a_killed_child_reports_the_signal(server, tmp_path):
    child = server.start(CHILDREN, ["fork_probe", "sleep"], environment(), str(tmp_path))
    child.stdout.readline()
    assert child.poll() is None
    kill_tree(child.pid)
    assert child.wait(timeout=30) == -signal.SIGKILL


@pytest.mark.e2e
def test_closing_the_server_kills_its_children(tmp_path):
    server = ForkServer(["torch"], environment())
    child = server.start(CHILDREN, ["fork_probe", "sleep"], environment(), str(tmp_path))
    child.stdout.readline()
    server.close()
    deadline = time.monotonic() + 30
    while psutil.pid_exists(child.pid) and time.monotonic() < deadline:
        if psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE:
            break
        time.sleep(0.1)
    assert not psutil.pid_exists(child.pid) or psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE
    assert child.wait(timeout=10) == -signal.SIGKILL


@pytest.mark.e2e
def test_a_server_that_cannot_preload_says_which_module():
    with pytest.raises(ForkServerError, match="could not preload.*no_such_module_here"):
        ForkServer(["no_such_module_here"], environment())


def test_per_child_variables_share_a_server_and_other_differences_do_not():
    base = environment()
    same = server_key(["torch"], {**base, "TORCHINDUCTOR_CACHE_DIR": "/a", "CUDA_VISIBLE_DEVICES": "1"})
    assert same == server_key(["torch"], {**base, "TORCHINDUCTOR_CACHE_DIR": "/b"})
    assert server_key(["torch"], {**base, "PJRT_DEVICE": "CPU"}) != server_key(["torch"], base)
    assert server_key(["torch", "torch_xla"], base) != server_key(["torch"], base)


def test_a_child_whose_environment_names_its_own_folder_is_not_forked():
    folder = "/runs/exp/run/time"
    assert names_own_folder({"XLA_FLAGS": f"--xla_dump_to={folder}/hlo"}, [folder])
    assert not names_own_folder({"TORCHINDUCTOR_CACHE_DIR": f"{folder}/x"}, [folder])


@pytest.mark.e2e
def test_servers_are_reused_per_environment_and_restarted_when_gone(tmp_path):
    """... and each server that ended is told (`on_end`: the runner's guard forgets its
    process group, whose number another group may take)."""
    started, ended = [], []
    servers = ForkServers(on_start=started.append, on_end=ended.append)
    try:
        first = servers.server_for(["torch"], environment(TORCHINDUCTOR_CACHE_DIR="/a"))
        assert servers.server_for(["torch"], environment(TORCHINDUCTOR_CACHE_DIR="/b")) is first
        os.kill(first.pid, signal.SIGKILL)
        first.process.wait()
        deadline = time.monotonic() + 10
        while first.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        second = servers.server_for(["torch"], environment())
        assert second is not first and second.alive()
        assert started == [first, second]
        assert ended == [first.pid]
    finally:
        servers.close()
    assert ended == [first.pid, second.pid] and not second.alive()


@pytest.mark.e2e
def test_prestarted_servers_run_side_by_side_and_are_the_ones_children_get(tmp_path):
    started = []
    servers = ForkServers(on_start=started.append)
    try:
        wanted = [(["torch"], environment(TORCHINDUCTOR_CACHE_DIR="/a")),
                  (["torch"], environment(TORCHINDUCTOR_CACHE_DIR="/b")),  # the same server
                  (["torch"], environment(PJRT_DEVICE="CPU"))]
        servers.prestart(wanted)
        assert len(started) == 2 and all(server.alive() for server in started)
        # Both imported at once: each one's process began before the other was ready.
        first, second = (psutil.Process(server.pid).create_time() for server in started)
        assert abs(first - second) < 1.0
        assert servers.server_for(["torch"], environment()) in started
        assert servers.server_for(["torch"], environment(PJRT_DEVICE="CPU")) in started
        servers.prestart(wanted)  # nothing more to start
        assert len(started) == 2
    finally:
        servers.close()
    for server in started:
        assert server.process.poll() is not None  # ended, none left behind


def idle_children(server, expected: int, seconds: float = 30.0) -> list[psutil.Process]:
    """The server's children once they number `expected` (or after `seconds`)."""
    deadline = time.monotonic() + seconds
    while True:
        children = []
        for child in psutil.Process(server.pid).children():
            try:
                if child.status() != psutil.STATUS_ZOMBIE:
                    children.append(child)
            except psutil.NoSuchProcess:  # reaped meanwhile
                continue
        if len(children) == expected or time.monotonic() > deadline:
            return children
        time.sleep(0.02)


@pytest.mark.e2e
def test_each_child_comes_from_a_spare_forked_ahead_and_a_new_spare_follows(tmp_path):
    server = ForkServer(["torch"], environment())
    try:
        (spare,) = idle_children(server, 1)  # forked once the server was ready
        code, output = run_probe(server, tmp_path, "first")
        assert code == 0 and probe_state(output)["pid"] == spare.pid
        (next_spare,) = idle_children(server, 1)
        assert next_spare.pid != spare.pid
        # A spare that is gone is replaced at the next request (the child forked on request).
        next_spare.kill()
        next_spare.wait(timeout=30)
        code, output = run_probe(server, tmp_path, "second", FORK_PROBE="seen")
        state = probe_state(output)
        assert code == 0 and state["argv"] == ["second"]
        assert state["variables"]["FORK_PROBE"] == "seen" and state["cwd"] == str(tmp_path)
        assert state["pid"] != next_spare.pid and state["pgid"] == state["pid"]
        assert len(idle_children(server, 1)) == 1
    finally:
        server.close()
    assert not psutil.pid_exists(spare.pid) or spare.status() == psutil.STATUS_ZOMBIE

