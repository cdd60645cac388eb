"""The Ray executor on a real Ray cluster: `ray.cluster_utils.Cluster`, two nodes of one CPU
each on this machine, real experiments in real children (the builtin suite, eager).

Every Ray process binds to 127.0.0.1 and contacts nothing else (the node IP address is
127.0.0.1, with runner.run.dispatch.ray_cluster.LOOPBACK_ENVIRONMENT); each test checks that every
listening socket of the cluster is on loopback. Each cluster has its own short temporary
folder (Ray's socket paths must stay under 108 characters) and lets Ray pick free ports, so
tests run side by side under pytest-xdist; with `--dist=loadgroup` they share one worker.
"""

from __future__ import annotations

import contextlib
import importlib.util
import ipaddress
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import psutil
import pytest

from runner.run.dispatch.ray_cluster import (
    LOOPBACK_ENVIRONMENT,
    LOOPBACK_IP,
    RayClusterError,
    cluster_capacity,
    host_and_port,
    import_ray,
    is_loopback_address,
    task_resources,
)
from tests.conftest import PROJECT_ROOT, CliRun, cli_command, cli_environment

HAS_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAS_RAY, reason="needs the ray extra (make test installs it)")

EAGER_CPU = ["--accelerator=cpu", "--xla=None", "--dynamo=None", "--test=eval", "--repeat=1",
             "--warmup=1"]
#: Two eager experiments: one for each node of the cluster.
TWO_EXPERIMENTS = [*EAGER_CPU, "-k", "^(mlp|cnn)$"]


@dataclass
class TwoNodes:
    """A running Ray cluster of this machine: the head and one more node, 1 CPU each."""

    cluster: Any
    head: Any
    worker: Any

    @property
    def address(self) -> str:
        return self.cluster.address


@contextlib.contextmanager
def started_head() -> Iterator[Any]:
    """A `Cluster` of its head alone, with the loopback environment (which the nodes added
    to it later inherit) until it ends."""
    base = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in LOOPBACK_ENVIRONMENT.items():
            patch.setenv(name, value)
        patch.setenv("RAY_TMPDIR", base)
        ray = import_ray(LOOPBACK_IP)
        from ray.cluster_utils import Cluster

        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 1, "node_ip_address": LOOPBACK_IP, "include_dashboard": False})
        try:
            yield cluster
        finally:
            ray.shutdown()
            cluster.shutdown()
            shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def head_of_module() -> Iterator[Any]:
    """One head for the module's tests: starting one cost 6 to 10 s (a worker node, 2)."""
    with started_head() as cluster:
        yield cluster


@pytest.fixture
def two_nodes(head_of_module) -> TwoNodes:
    """The module's head and a worker node, both alive: the worker the last test left, or a
    new one where that test lost it (each test ends with no task of its own left on the
    cluster)."""
    cluster = head_of_module
    if not cluster.worker_nodes:
        cluster.add_node(num_cpus=1, node_ip_address=LOOPBACK_IP)
        cluster.wait_for_nodes()  # the lost node is no longer counted alive
    (worker,) = cluster.worker_nodes
    return TwoNodes(cluster, cluster.head_node, worker)


def listening_sockets() -> list[tuple[str, str, int]]:
    """(process, address, port) of every listening socket of this process's descendants
    (the Ray processes of the cluster, its workers and the runner's children)."""
    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            connections = process.net_connections(kind="inet")
            name = process.name()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        for connection in connections:
            if connection.status == psutil.CONN_LISTEN:
                found.append((name, connection.laddr.ip, connection.laddr.port))
    return found


def is_loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip.split("%", 1)[0])
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def assert_everything_listens_on_loopback() -> None:
    sockets = listening_sockets()
    assert any(name == "gcs_server" for name, _, _ in sockets), sockets
    assert all(is_loopback(ip) for _, ip, _ in sockets), sockets


def raylet_pid(node) -> int:
    import ray._private.ray_constants as ray_constants

    return node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid


def children_under(pid: int, module: str) -> list[psutil.Process]:
    """The `python -m <module>` processes below `pid`."""
    try:
        below = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for process in below:
        try:
            if module in process.cmdline():
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def command_of(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return ""


def runner_processes_under(pid: int) -> list[psutil.Process]:
    """The experiments' children and guards below `pid`, and everything the children
    started."""
    found = children_under(pid, "child.worker") + children_under(pid, "runner.run.process.guard")
    for child in children_under(pid, "child.worker"):
        try:
            found += child.children(recursive=True)
        except psutil.NoSuchProcess:
            continue
    return found


def start_cli(output: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(cli_command(output, *args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=cli_environment(),
                            cwd=str(output.parent))


def finish(process: subprocess.Popen, output: Path, timeout: float = 420) -> CliRun:
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
    return CliRun(process.returncode, stdout, stderr, output)


def run_to_end(output: Path, *args: str) -> CliRun:
    return finish(start_cli(output, *args), output)


def lose_the_worker_node_mid_experiment(nodes: TwoNodes, process: subprocess.Popen) -> None:
    """Wait until the worker node runs an experiment's child, hold the child there (so it
    cannot finish first), and remove the node."""
    deadline = time.monotonic() + 180
    raylet = raylet_pid(nodes.worker)
    held: list[psutil.Process] = []
    while not held:
        assert process.poll() is None, "the sweep ended before the worker node ran anything"
        assert time.monotonic() < deadline, "the worker node ran no experiment"
        held = children_under(raylet, "child.worker")
        time.sleep(0.1)
    try:
        for child in held:
            child.send_signal(signal.SIGSTOP)
        assert_everything_listens_on_loopback()
        nodes.cluster.remove_node(nodes.worker)
    finally:
        for child in held:  # the node's loss killed it; never leave one stopped
            try:
                child.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass


# Without a cluster.

def test_loopback_addresses_are_recognised():
    assert is_loopback_address(None)
    assert is_loopback_address("127.0.0.1:6379") and is_loopback_address("localhost:1")
    assert is_loopback_address("[::1]:6379")
    assert not is_loopback_address("10.0.0.5:6379") and not is_loopback_address("auto")
    assert host_and_port("ray://head:10001") == ("head", 10001)
    assert host_and_port("auto") == ("auto", None)


def test_each_task_asks_for_its_accelerator():
    assert task_resources("cpu", 2) == {"num_cpus": 2, "num_gpus": 0}
    assert task_resources("cuda", 1) == {"num_cpus": 1, "num_gpus": 1}
    assert task_resources("tpu", 1) == {"num_cpus": 1, "num_gpus": 0, "resources": {"TPU": 1}}


def test_capacity_is_what_the_cluster_holds():
    cluster = {"CPU": 16.0, "GPU": 4.0}
    assert cluster_capacity({"cpu"}, 1, cluster, {"CPU": 8.0, "GPU": 2.0}) == 16
    assert cluster_capacity({"cpu"}, 3, cluster, {"CPU": 8.0, "GPU": 2.0}) == 5
    assert cluster_capacity({"cuda"}, 1, cluster, {"CPU": 8.0, "GPU": 2.0}) == 4
    assert cluster_capacity({"cpu", "cuda"}, 1, cluster, {"CPU": 8.0, "GPU": 2.0}) == 16
    with pytest.raises(RayClusterError, match="asks for 9 CPU"):
        cluster_capacity({"cpu"}, 9, cluster, {"CPU": 8.0})
    with pytest.raises(RayClusterError, match="tpu experiments and no node .* TPU"):
        cluster_capacity({"tpu"}, 1, cluster, {"CPU": 8.0, "GPU": 2.0})


@pytest.mark.e2e
@pytest.mark.parametrize("args, named", [
    (["--executor=ray", "--jobs=2"], "--jobs=2"),
    (["--executor=ray", "--devices=0,1"], "--devices=0,1"),
    (["--retries=2"], "--retries=2"),
    (["--ray-address=127.0.0.1:6379"], "--ray-address=127.0.0.1:6379"),
    (["--ray-tasks=3", "--ray-cpus-per-task=2"], "--ray-cpus-per-task=2 --ray-tasks=3"),
    (["--executor=ray", "--retries=-1"], "'-1'"),
    (["--executor=ray", "--ray-cpus-per-task=0"], "'0'"),
    (["--executor=dask"], "'dask'"),
])
def test_flags_that_do_not_go_together_are_refused(run_cli, args, named):
    run = run_cli(*args, *TWO_EXPERIMENTS)
    assert run.returncode == 2, run.stderr
    assert named in run.stderr, run.stderr
    assert not run.results_path.exists()


@pytest.mark.e2e
def test_a_missing_ray_is_a_usage_error_naming_the_extra(tmp_path):
    hidden = tmp_path / "no_ray"
    (hidden / "ray").mkdir(parents=True)
    (hidden / "ray" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'ray'\")\n")
    environment = cli_environment()
    environment["PYTHONPATH"] = os.pathsep.join([str(hidden), str(PROJECT_ROOT)])
    output = tmp_path / "output"
    completed = subprocess.run(cli_command(output, "--executor=ray", *TWO_EXPERIMENTS),
                               capture_output=True, text=True, env=environment, timeout=300)
    assert completed.returncode == 2, completed.stderr
    assert "pip install experiment-runner[ray]" in completed.stderr
    assert "No module named 'ray'" in completed.stderr
    assert not (output / "results.jsonl").exists()


@pytest.mark.e2e
@needs_ray
def test_an_address_where_nothing_answers_is_a_usage_error(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_TMPDIR", tempfile.mkdtemp(prefix="rt", dir="/tmp"))
    run = run_cli("--executor=ray", "--ray-address=127.0.0.1:1", *TWO_EXPERIMENTS, timeout=120)
    shutil.rmtree(os.environ["RAY_TMPDIR"], ignore_errors=True)
    assert run.returncode == 2, run.stderr
    assert "nothing answers at --ray-address=127.0.0.1:1" in run.stderr


# On a two-node cluster.

@pytest.mark.e2e
@needs_ray
def test_a_sweep_on_the_cluster_records_each_experiment_once_and_resumes(two_nodes, tmp_path):
    output = tmp_path / "output"
    args = ["--executor=ray", f"--ray-address={two_nodes.address}", *TWO_EXPERIMENTS]
    pool = tmp_path / "pool"
    first = run_to_end(output, *args, f"--server-pool={pool}")
    assert first.returncode == 0, first.stderr
    # The tasks start their children; the driver starts no fork server, pooled or not.
    assert not list(pool.glob("*.pid")), sorted(path.name for path in pool.iterdir())
    lines = first.lines()
    assert sorted(line["model"]["model_name"] for line in lines) == ["cnn", "mlp"]
    for line in lines:
        assert line["status"] == "ok", line["metrics"].get("error")
        assert len(line["metrics"]["per_iter_time"]) == 2  # the cold start, one timed run
        assert all(t > 0 for t in line["metrics"]["per_iter_time"])
        assert line["summary"]["wall_time"] > 0
        assert line["environment"]["ray_node_ip"] == LOOPBACK_IP
        # The children wrote their folders under the same output path (one machine here).
        assert (output / line["artifacts"]["time"] / "result.json").is_file()
    # One CPU per node and one per task: the two experiments ran side by side, one a node.
    assert {line["environment"]["ray_node_id"] for line in lines} == {
        two_nodes.head.node_id, two_nodes.worker.node_id}
    assert "2 experiment(s) recorded" in first.stdout
    assert_everything_listens_on_loopback()

    second = run_to_end(output, *args)
    assert second.returncode == 0, second.stderr
    assert "2 experiment(s) already recorded" in second.stdout
    assert "0 experiment(s) recorded" in second.stdout
    assert len(second.lines()) == 2

    too_big = run_to_end(output, *args, "--ray-cpus-per-task=4")
    assert too_big.returncode == 2, too_big.stderr
    assert "asks for 4 CPU(s) and no node of the Ray cluster has that many" in too_big.stderr


@pytest.mark.e2e
@needs_ray
def test_stopping_the_sweep_cancels_its_tasks_and_kills_their_whole_process_tree(
        two_nodes, tmp_path):
    output = tmp_path / "output"
    sweep = start_cli(output, "--executor=ray", f"--ray-address={two_nodes.address}",
                      "--suite-name=faults", "-k", "^hang$", *EAGER_CPU)
    raylets = [raylet_pid(two_nodes.head), raylet_pid(two_nodes.worker)]
    deadline = time.monotonic() + 180
    started: list[psutil.Process] = []
    # Until the hang model's child has started its grandchild (a sleep of an hour).
    while not any("time.sleep(3600)" in command_of(process) for process in started):
        assert sweep.poll() is None and time.monotonic() < deadline, "the hang model never ran"
        time.sleep(0.2)
        started = [process for pid in raylets for process in runner_processes_under(pid)]
    sweep.send_signal(signal.SIGTERM)
    run = finish(sweep, output, timeout=120)
    assert run.returncode == 128 + signal.SIGTERM, run.stderr
    assert "terminated (SIGTERM): 0 experiment(s) finished" in run.stderr
    gone, alive = psutil.wait_procs(started, timeout=10)
    for process in alive:
        process.kill()
    assert not alive, [process.cmdline() for process in alive]
    assert not run.results_path.exists() or run.lines() == []


@pytest.mark.e2e
@needs_ray
def test_a_node_lost_mid_experiment_gives_a_failed_line_naming_it(two_nodes, tmp_path):
    output = tmp_path / "output"
    sweep = start_cli(output, "--executor=ray", f"--ray-address={two_nodes.address}",
                      *TWO_EXPERIMENTS)
    lost = two_nodes.worker.node_id
    lose_the_worker_node_mid_experiment(two_nodes, sweep)
    run = finish(sweep, output)
    assert run.returncode == 0, run.stderr
    lines = {line["status"]: line for line in run.lines()}
    assert sorted(lines) == ["failed", "ok"], run.lines()
    error = lines["failed"]["metrics"]["error"]
    assert "the Ray node running this experiment was lost" in error
    assert f"node ID: {lost}" in error and "--retries=N" in error
    assert lines["failed"]["verification_code"] == "VERIFIER_DIDNT_RUN"
    assert lines["failed"]["failure_kind"] == "infrastructure"
    assert lines["ok"]["environment"]["ray_node_id"] == two_nodes.head.node_id
    assert "1 failed" in run.stdout

    # A lost node is no failure of the experiment (issue 23): running the same command
    # again runs it again, and only it.
    again = run_to_end(output, "--executor=ray", f"--ray-address={two_nodes.address}",
                       *TWO_EXPERIMENTS)
    assert again.returncode == 0, again.stderr
    assert len(again.lines()) == 3
    assert again.lines()[2]["fingerprint"] == lines["failed"]["fingerprint"]
    assert again.lines()[2]["status"] == "ok"


@pytest.mark.e2e
@needs_ray
def test_with_retries_a_lost_experiment_runs_again_on_the_remaining_node(two_nodes, tmp_path):
    output = tmp_path / "output"
    sweep = start_cli(output, "--executor=ray", f"--ray-address={two_nodes.address}",
                      "--retries=1", *TWO_EXPERIMENTS)
    lose_the_worker_node_mid_experiment(two_nodes, sweep)
    run = finish(sweep, output)
    assert run.returncode == 0, run.stderr
    lines = run.lines()
    assert len(lines) == 2
    for line in lines:
        assert line["status"] == "ok", line["metrics"].get("error")
        assert all(t > 0 for t in line["metrics"]["per_iter_time"])
        # Both ran on the head in the end: the lost one again, once the head was free.
        assert line["environment"]["ray_node_id"] == two_nodes.head.node_id
    assert len({line["fingerprint"] for line in lines}) == 2


@pytest.mark.e2e
@needs_ray
def test_a_killed_driver_leaves_no_process_of_the_ray_instance_it_started(tmp_path, monkeypatch):
    """Issue 23: after the driver was SIGKILLed, the dashboard and runtime-env agents of the
    local instance it had started lived on for minutes; its guard now kills them at once."""
    base = tempfile.mkdtemp(prefix="rk", dir="/tmp")  # Ray's socket paths stay short
    monkeypatch.setenv("RAY_TMPDIR", base)
    output = tmp_path / "output"
    sweep = start_cli(output, "--executor=ray", "--suite-name=faults", "-k", "^hang$", *EAGER_CPU)
    try:
        deadline = time.monotonic() + 240
        ray_processes: list[psutil.Process] = []
        while not any("time.sleep(3600)" in command_of(process) for process in ray_processes):
            assert sweep.poll() is None and time.monotonic() < deadline, "the hang model never ran"
            time.sleep(0.5)
            ray_processes = psutil.Process(sweep.pid).children(recursive=True)
        agents = [p for p in ray_processes if "agent" in command_of(p)]
        assert agents, [command_of(p) for p in ray_processes]  # the dashboard, runtime-env agents
        sweep.kill()
        sweep.communicate(timeout=60)
        _, alive = psutil.wait_procs(ray_processes, timeout=20)
        alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        for process in alive:
            process.kill()
        # The agents, and the experiment's grandchild (its task's own guard kills it).
        assert not alive, [command_of(process)[:100] for process in alive]
    finally:
        if sweep.poll() is None:
            sweep.kill()
        shutil.rmtree(base, ignore_errors=True)
