"""Run experiments as tasks of a Ray cluster (`--executor=ray`).

Each experiment is one Ray task that asks for what it needs: CPUs (`cpus_per_task`, 1 by
default), one GPU for a CUDA experiment, one `TPU` resource for a TPU experiment. Inside the
Ray worker the task builds an `ExperimentExecutor` from the sweep's options, settings and
identity and runs the experiment in isolated children, as a local run does; it returns the
line, which the driver (the sweep, runner/run/sweep.py) records. The driver alone writes the
results file, so claims and resume work as they do locally.

The children write their folders under the same output path on the node that ran them:
artifacts stay on that node unless the output folder is shared between the nodes. A line
says which node made it (`environment.ray_node_id`, `environment.ray_node_ip`).

A node lost while it runs an experiment (or its worker killed) gives a failed line that says
so, with `failure_kind` "infrastructure", which resume runs again; with `retries`, Ray runs
the task again (elsewhere if need be) up to that many times first. A failure of the harness itself inside the task (a full disk, a node without the
project installed) stops the sweep, as it does locally.

Ray is imported only here, and only when a dispatcher is made: the runner never needs it.
A Ray instance this dispatcher starts itself (no address), or one it reaches on a loopback
address, is kept to this machine: every Ray process binds to 127.0.0.1 and contacts nothing
beyond it (see `LOOPBACK_ENVIRONMENT`).
"""

from __future__ import annotations

import ipaddress
import logging
import math
import os
import signal
import socket
import threading
from concurrent.futures import Future, wait
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any, Iterable, Mapping, Optional

import psutil

from core.config import RunSettings
from core.schema import FailureKind, Status, VerificationCode, bounded
from runner.run.executor import ExecutorOptions, ExperimentExecutor, SweepInfo
from runner.run.process.guard import ProcessGuard
from runner.plan.matrix import PlannedExperiment
from runner.run.process.scratch import ScratchRoot

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install experiment-runner[ray]"
LOOPBACK_IP = "127.0.0.1"
#: A loopback port nothing listens on: HTTP sent through it goes nowhere.
_NOWHERE = f"http://{LOOPBACK_IP}:9"
#: What the Ray processes of a loopback-only instance get in their environment, set before
#: Ray is imported or started:
#: - Ray finds a node's address by routing a socket to a public DNS server (8.8.8.8), and
#:   replaces 127.0.0.1 by what it finds, unless multi-node clusters are off; with them off
#:   the node, the driver and the addresses they exchange are all 127.0.0.1.
#: - No usage statistics, and not even the notice that they are off.
#: - Ray's dashboard process asks cloud metadata services (169.254.169.254) which cloud it
#:   runs in; its HTTP goes to a closed loopback port instead (loopback itself is exempt).
CLUSTER_MODE_VARIABLE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
LOOPBACK_ENVIRONMENT = {
    CLUSTER_MODE_VARIABLE: "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_USAGE_STATS_REPORT_URL": f"{_NOWHERE}/",
    "http_proxy": _NOWHERE,
    "https_proxy": _NOWHERE,
    "HTTP_PROXY": _NOWHERE,
    "HTTPS_PROXY": _NOWHERE,
    "no_proxy": "localhost,127.0.0.1,::1",
    "NO_PROXY": "localhost,127.0.0.1,::1",
}
#: How long a cluster's head has to accept a connection.
CONNECT_TIMEOUT_SECONDS = 10.0
#: How long `close` waits for tasks to end before it kills their workers, then again
#: before it leaves the cluster.
CANCEL_GRACE_SECONDS = 15.0
#: Object store of a Ray instance this dispatcher starts: lines are a few KiB.
LOCAL_OBJECT_STORE_BYTES = 200 * 2**20


class RayUnavailableError(RuntimeError):
    """Ray cannot be imported here."""


class RayClusterError(RuntimeError):
    """The Ray cluster cannot be reached, or cannot run the plan's experiments."""


@dataclass(frozen=True)
class RayOptions:
    """Where the cluster is and what each experiment's task asks of it."""

    #: ray.init's address: None starts a Ray instance on this machine, bound to 127.0.0.1;
    #: "auto" finds a running one; "HOST:PORT" is a cluster's head (its GCS).
    address: Optional[str] = None
    #: CPUs each task requests (Ray does not pin them: the children use the node's cores).
    cpus_per_task: float = 1.0
    #: How often Ray runs a task again whose node or worker was lost.
    retries: int = 0
    #: Tasks in flight at a time; None: as many as the cluster's resources hold.
    max_in_flight: Optional[int] = None


def import_ray(address: Optional[str] = None) -> ModuleType:
    """The ray module, or RayUnavailableError naming the extra to install.

    For a loopback `address` (or None: a new local instance), Ray's multi-node mode is
    turned off first: Ray reads that switch once, when it is imported.
    """
    if is_loopback_address(address):
        os.environ[CLUSTER_MODE_VARIABLE] = "0"
    try:
        import ray
    except ImportError as error:
        raise RayUnavailableError(
            f"--executor=ray needs Ray, which cannot be imported here ({error}): "
            f"{INSTALL_HINT}") from None
    return ray


def host_and_port(address: str) -> tuple[str, Optional[int]]:
    """The host and port of a ray.init address ('HOST:PORT', '[V6]:PORT', 'ray://HOST:PORT');
    the port is None where there is none (e.g. 'auto')."""
    rest = address.split("://", 1)[-1].rstrip("/")
    if rest.startswith("["):
        host, _, tail = rest[1:].partition("]")
        port_text = tail[1:] if tail.startswith(":") else ""
    elif rest.count(":") == 1:
        host, port_text = rest.split(":")
    else:
        host, port_text = rest, ""
    return host, int(port_text) if port_text.isdigit() else None


def is_loopback_address(address: Optional[str]) -> bool:
    """Whether a ray.init address names this machine's loopback (None: a new local instance)."""
    if address is None:
        return True
    host, _ = host_and_port(address)
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT_SECONDS) -> None:
    """RayClusterError when nothing answers at a HOST:PORT address (ray.init would retry for
    minutes); addresses without a port ('auto') are left to Ray."""
    host, port = host_and_port(address)
    if port is None:
        return
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as error:
        raise RayClusterError(f"nothing answers at --ray-address={address} "
                              f"({error.strerror or error}): is the Ray head running there?"
                              ) from None


def _ray_cluster_mode_off(ray: ModuleType) -> bool:
    """Whether this process's Ray keeps node addresses on loopback (see LOOPBACK_ENVIRONMENT)."""
    constants = getattr(getattr(ray, "_private", None), "ray_constants", None)
    return getattr(constants, "ENABLE_RAY_CLUSTER", None) is False


def task_resources(accelerator: str, cpus_per_task: float) -> dict[str, Any]:
    """The resource requests of one experiment's task (ray's `.options` keywords)."""
    request: dict[str, Any] = {"num_cpus": cpus_per_task, "num_gpus": 0}
    if accelerator == "cuda":
        request["num_gpus"] = 1
    elif accelerator == "tpu":
        request["resources"] = {"TPU": 1}
    return request


def cluster_capacity(accelerators: Iterable[str], cpus_per_task: float,
                     totals: Mapping[str, float], largest_node: Mapping[str, float]) -> int:
    """Tasks the cluster runs at a time for a plan on `accelerators`; RayClusterError when
    it cannot run them at all.

    `totals` are the cluster's resources, `largest_node` the most of each that one node has.
    """
    accelerators = set(accelerators)
    if largest_node.get("CPU", 0) < cpus_per_task:
        raise RayClusterError(
            f"each experiment's task asks for {cpus_per_task:g} CPU(s) and no node of the Ray "
            f"cluster has that many (the largest has {largest_node.get('CPU', 0):g})")
    capacity = math.floor(totals.get("CPU", 0) / cpus_per_task)
    for accelerator, resource in (("cuda", "GPU"), ("tpu", "TPU")):
        if accelerator not in accelerators:
            continue
        if largest_node.get(resource, 0) < 1:
            raise RayClusterError(
                f"the plan has {accelerator} experiments and no node of the Ray cluster has "
                f"a {resource} resource")
        if accelerators == {accelerator}:
            capacity = min(capacity, math.floor(totals.get(resource, 0)))
    return max(1, capacity)


def run_experiment_task(options: ExecutorOptions, settings: RunSettings, sweep: SweepInfo,
                        planned: PlannedExperiment) -> dict[str, Any]:
    """The body of an experiment's Ray task (runs in the Ray worker): the experiment in the
    isolated children of a fresh executor, with its own guard and scratch; its line."""
    import ray

    executor = ExperimentExecutor(options, settings, sweep, guard=ProcessGuard(),
                                  scratch=ScratchRoot())
    try:
        executor.start()
        line = executor.run(planned).to_dict()
    finally:
        executor.close()
    line["environment"]["ray_node_id"] = ray.get_runtime_context().get_node_id()
    line["environment"]["ray_node_ip"] = ray.util.get_node_ip_address()
    return line


class RayDispatcher:
    """Runs each experiment as a Ray task; each future gives the task's line, or a failed
    line when its node was lost (after `retries` more tries)."""

    def __init__(self, executor: ExperimentExecutor, options: RayOptions,
                 accelerators: Iterable[str]) -> None:
        self.executor = executor
        self.options = options
        # The task runs elsewhere: a relative output folder would land in the worker's cwd.
        # Each task runs one experiment with an executor of its own, so a fork server would
        # start for one child and save nothing: tasks spawn their children.
        self._task_options = replace(executor.options,
                                     output_dir=executor.options.output_dir.resolve(),
                                     start_method="spawn")
        self._environment_before: dict[str, Optional[str]] = {}
        self._lock = threading.Lock()
        self._running: dict[Any, Future] = {}
        self._connected_here = False
        if is_loopback_address(options.address):
            self._keep_ray_on_loopback()
        try:
            self._ray = ray = import_ray(options.address)
            if ray.is_initialized():
                log.info("using the Ray connection this process already has")
            else:
                self._connect(ray)
            self.capacity = options.max_in_flight or self._cluster_capacity(accelerators)
        except BaseException:
            self.close()
            raise
        self._task = ray.remote(run_experiment_task)
        log.info("Ray executor: up to %d experiment(s) at a time, %g CPU(s) each%s",
                 self.capacity, options.cpus_per_task,
                 f", {options.retries} retr{'y' if options.retries == 1 else 'ies'} "
                 "for a lost node" if options.retries else "")

    def _keep_ray_on_loopback(self) -> None:
        for name, value in LOOPBACK_ENVIRONMENT.items():
            self._environment_before[name] = os.environ.get(name)
            os.environ[name] = value

    def _connect(self, ray: ModuleType) -> None:
        address = self.options.address
        keywords: dict[str, Any] = {"log_to_driver": True}
        if is_loopback_address(address):
            if not _ray_cluster_mode_off(ray):
                raise RayClusterError(
                    "Ray was imported before the runner could keep it on 127.0.0.1; set "
                    f"{CLUSTER_MODE_VARIABLE}=0 before starting the runner")
            keywords["_node_ip_address"] = LOOPBACK_IP
        marked: dict[str, Optional[str]] = {}
        if address is None:
            keywords.update(include_dashboard=False,
                            object_store_memory=LOCAL_OBJECT_STORE_BYTES)
            # The local instance's processes (GCS, raylet, the dashboard and runtime-env
            # agents, workers) carry the runner's token: if the driver is killed (SIGKILL),
            # its guard kills them at once; they used to linger for minutes.
            if self.executor.guard is not None:
                for name, value in self.executor.guard.environment().items():
                    marked[name] = os.environ.get(name)
                    os.environ[name] = value
        else:
            check_reachable(address)
            keywords["address"] = address
        # ray.init makes SIGTERM exit the driver at once; the runner's own handler stops the
        # sweep cleanly (runner/run/process/signals.py), cancelling the tasks first.
        main_thread = threading.current_thread() is threading.main_thread()
        sigterm = signal.getsignal(signal.SIGTERM) if main_thread else None
        try:
            ray.init(**keywords)
        except (ConnectionError, RuntimeError, ValueError) as error:
            where = f"--ray-address={address}" if address else "a local Ray instance"
            raise RayClusterError(f"cannot start or reach {where}: {error}") from error
        finally:
            if sigterm is not None:
                signal.signal(signal.SIGTERM, sigterm)
            for name, value in marked.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        if address is None:
            self._watch_local_instance()
        self._connected_here = True
        log.info("connected to Ray: %s", address or "a new local instance on 127.0.0.1")

    def _watch_local_instance(self) -> None:
        """Have the guard kill the local instance's processes if the driver is killed: its
        agents rewrite their environment (their process title), so the token may not show;
        the guard knows them by pid and start time."""
        guard = self.executor.guard
        if guard is None:
            return
        try:
            processes = psutil.Process().children(recursive=True)
        except psutil.Error:
            return
        for process in processes:
            if process.pid != guard.pid:
                guard.watch_process(process.pid)

    def _cluster_capacity(self, accelerators: Iterable[str]) -> int:
        largest: dict[str, float] = {}
        for node in self._ray.nodes():
            if not node.get("Alive"):
                continue
            for name, amount in (node.get("Resources") or {}).items():
                largest[name] = max(largest.get(name, 0), amount)
        return cluster_capacity(accelerators, self.options.cpus_per_task,
                                self._ray.cluster_resources(), largest)

    def submit(self, planned: PlannedExperiment) -> "Future[dict[str, Any]]":
        resources = task_resources(planned.experiment.accelerator, self.options.cpus_per_task)
        ref = self._task.options(
            name=planned.experiment_id, max_retries=self.options.retries,
            retry_exceptions=False, **resources,
        ).remote(self._task_options, self.executor.settings, self.executor.sweep, planned)
        line: "Future[dict[str, Any]]" = Future()
        with self._lock:
            self._running[ref] = line
        ref.future().add_done_callback(
            lambda done: self._settle(planned, ref, done, line))
        return line

    def _settle(self, planned: PlannedExperiment, ref: Any, done: Future, line: Future) -> None:
        """Turn the task's outcome into the line's future (called by Ray's thread)."""
        with self._lock:
            self._running.pop(ref, None)
        try:
            line.set_result(done.result())
        except BaseException as error:  # noqa: BLE001 - every outcome must settle the line
            lost = self.lost_reason(error)
            if lost is not None:
                log.warning("%s: %s", planned.experiment_id, lost.splitlines()[0])
                line.set_result(self.failed_line(planned, lost))
            else:
                line.set_exception(self._harness_error(error))

    def lost_reason(self, error: BaseException) -> Optional[str]:
        """What a Ray failure means for the experiment, when it means its node or worker was
        lost (None for anything else)."""
        exceptions = self._ray.exceptions
        cause = error
        if isinstance(error, exceptions.RayTaskError) and error.cause is not None:
            cause = error.cause
        kinds = (
            (exceptions.OutOfMemoryError,
             "Ray killed the worker running this experiment: its node ran out of memory"),
            ((exceptions.NodeDiedError, exceptions.LocalRayletDiedError),
             "the Ray node running this experiment was lost"),
            (exceptions.WorkerCrashedError,
             "the Ray worker running this experiment died (its node may have been lost)"),
            (exceptions.ObjectLostError,
             "the experiment's result was lost with the Ray node that held it"),
        )
        for kind, text in kinds:
            if isinstance(cause, kind):
                retries = self.options.retries
                tried = (f", on every one of its {retries + 1} tries (--retries={retries})"
                         if retries else " (--retries=N runs it again)")
                return bounded(f"{text}{tried}: {type(cause).__name__}: {cause}")
        return None

    def _harness_error(self, error: BaseException) -> BaseException:
        """The exception that stops the sweep: the task's own, unwrapped where it is an
        OSError (a full disk stops a sweep as it does locally)."""
        cause = getattr(error, "cause", None)
        if isinstance(error, self._ray.exceptions.RayTaskError) and isinstance(cause, OSError):
            return cause
        return error

    def failed_line(self, planned: PlannedExperiment, reason: str) -> dict[str, Any]:
        """The line of an experiment whose task was lost with its node or worker."""
        return self.executor.new_line(
            planned, status=Status.FAILED, metrics={"error": reason},
            verification_code=VerificationCode.VERIFIER_DIDNT_RUN,
            failure_kind=FailureKind.INFRASTRUCTURE).to_dict()

    def set_backlog(self, count: int) -> None:
        """Ray's tasks hold their resources to the end: nothing is lent."""

    def skipped_line(self, planned: PlannedExperiment, reason: str) -> dict[str, Any]:
        return self.executor.skipped_line(planned, reason).to_dict()

    def cancel(self) -> None:
        """Cancel every task not finished. A running one is interrupted in its worker, where
        the executor kills the experiment's whole process tree; `close` kills the workers of
        those that have not ended by then."""
        self._cancel_running(force=False)

    def _cancel_running(self, force: bool) -> int:
        with self._lock:
            refs = list(self._running)
        for ref in refs:
            try:
                self._ray.cancel(ref, force=force)
            except Exception as error:  # noqa: BLE001 - a task that just ended
                log.debug("cancelling %s: %s", ref, error)
        return len(refs)

    def close(self) -> None:
        """Wait for the tasks still running (after a cancel, a grace period, then their
        workers are killed), then leave the cluster if this dispatcher joined it; restore
        the environment it changed."""
        with self._lock:
            pending = list(self._running.values())
        if pending:
            _, not_done = wait(pending, timeout=CANCEL_GRACE_SECONDS)
            if not_done and self._cancel_running(force=True):
                log.warning("killed the Ray workers of %d experiment(s) that did not stop",
                            len(not_done))
                wait(not_done, timeout=CANCEL_GRACE_SECONDS)
        if self._connected_here:
            self._ray.shutdown()
            self._connected_here = False
        for name, value in self._environment_before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._environment_before = {}
