"""Children that start fast: a preloaded fork server per stack family.

A fork server is a Python process that imports a stack family's libraries once (torch, and
torch_xla or jax where the stack needs them) and then forks one child per request. The
child takes its own session, its own output pipe, folder and environment, and runs
`child.worker` as a spawned interpreter would; the server reaps it and tells the runner
its exit status. Nothing that holds a device or compiler state is made before the fork: no
CUDA context, no XLA client, no dynamo cache (a server checks this and reports it).

Isolation stays as with fresh interpreters:
- each child has a fresh dynamo state and its own compile cache folder
  (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR are per child and read lazily);
- each child is the leader of a process group of its own, so killing its tree works as for
  a spawned child; a child dies with its server, and a server with its runner.

A child whose environment differs from its server's in anything but the per-child
variables below would see the server's values in whatever the preloaded libraries read at
import time; such a child gets a server of its own environment, or, when its environment
names its own folder (an observer's dump path), a fresh interpreter.

This module is the runner's side; the server's side (runner/run/process/forkserver_server.py) runs as
`python -m runner.run.process.forkserver_server FD MODULES`. They speak JSON messages over a
SOCK_SEQPACKET socket, the child's output pipe travelling with its request.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any, Mapping, Optional, Sequence

from runner.run.process.forkserver_pool import PoolError, pooled_server, warm_template
from runner.run.process.forkserver_server import MAX_MESSAGE_BYTES
from runner.run.process.guard import PROJECT_ROOT

log = logging.getLogger(__name__)

#: Read lazily by torch, triton and the CUDA runtime, so a forked child may set them itself.
PER_CHILD_VARIABLES = frozenset({"TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
                                 "CUDA_VISIBLE_DEVICES"})
SERVER_START_TIMEOUT_SECONDS = 300.0


class ForkServerError(RuntimeError):
    """A fork server could not start or answer."""


class ForkedChild:
    """A child forked by a server: the subset of subprocess.Popen the executor uses."""

    def __init__(self, server: "ForkServer", pid: int, stdout: IO[bytes]) -> None:
        self.server, self.pid, self.stdout = server, pid, stdout
        self.returncode: Optional[int] = None

    @property
    def lost_reason(self) -> Optional[str]:
        """Why the child ended with its server, when it did (an infrastructure failure, not
        the experiment's): None while it runs or when its server told its exit status."""
        if self.returncode is None or not self.server.lost(self.pid):
            return None
        return f"its fork server (pid {self.server.pid}) {self.server.describe_end()} while it ran"

    def poll(self) -> Optional[int]:
        if self.returncode is None:
            self.returncode = self.server.exit_status(self.pid, timeout=0)
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        if self.returncode is None:
            status = self.server.exit_status(self.pid, timeout=timeout)
            if status is None:
                raise subprocess.TimeoutExpired(f"forked child {self.pid}", timeout or 0)
            self.returncode = status
        return self.returncode


class ForkServer:
    """One server process: preloads `modules` under `environment`, forks children."""

    def __init__(self, modules: Sequence[str], environment: Mapping[str, str],
                 pool: Optional[Path] = None) -> None:
        """A server of its own, or, with `pool`, one forked by the pool's template
        (runner/run/process/forkserver_pool.py; PoolError where the pool cannot give one)."""
        self.modules = tuple(modules)
        self.pooled = pool is not None
        if pool is not None:
            self._socket, self.process = pooled_server(pool, self.modules, environment)
        else:
            self._socket, self.process = self._start_own(environment)
        self._requests = threading.Lock()
        self._changed = threading.Condition()
        self._replies: list[dict[str, Any]] = []
        self._exits: dict[int, int] = {}
        #: Children that ended with the server, their exit status never told.
        self._lost: set[int] = set()
        self._gone = False
        ready = self._receive_blocking(SERVER_START_TIMEOUT_SECONDS)
        if "error" in ready:
            self.close()
            raise ForkServerError(f"the fork server could not preload {', '.join(self.modules)}: "
                                  f"{ready['error']}")
        self.info = ready
        self._reader = threading.Thread(target=self._read, name="forkserver-reader", daemon=True)
        self._reader.start()

    def _start_own(self, environment: Mapping[str, str]) -> tuple[socket.socket, subprocess.Popen]:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "runner.run.process.forkserver_server", str(theirs.fileno()),
                 ",".join(self.modules)],
                pass_fds=[theirs.fileno()], env=dict(environment), cwd=str(PROJECT_ROOT),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        return ours, process

    @property
    def pid(self) -> int:
        return self.process.pid

    def start(self, module: str, argv: Sequence[str], environment: Mapping[str, str],
              cwd: str) -> ForkedChild:
        """Fork a child that runs `module.main(argv)` in `cwd` under `environment`; its
        output (stdout and stderr) comes out of the returned child's `stdout`."""
        read_end, write_end = os.pipe()
        request = {"op": "fork", "module": module, "argv": list(argv),
                   "environment": dict(environment), "cwd": cwd}
        try:
            with self._requests:
                self._send(request, [write_end])
                reply = self._reply()
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        if "error" in reply:
            os.close(read_end)
            raise ForkServerError(f"the fork server could not fork: {reply['error']}")
        return ForkedChild(self, int(reply["pid"]), os.fdopen(read_end, "rb", buffering=0))

    def status(self) -> dict[str, Any]:
        """What the server holds now: threads, loaded modules, device state."""
        with self._requests:
            self._send({"op": "status"}, [])
            return self._reply()

    def exit_status(self, pid: int, timeout: Optional[float]) -> Optional[int]:
        """The child's exit status (negative: killed by that signal), None while it runs."""
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits or self._gone, timeout=timeout)
            if pid in self._exits:
                return self._exits.pop(pid)
            if self._gone:
                self._lost.add(pid)
                return -signal.SIGKILL  # its server died; the child died with it
            return None

    def lost(self, pid: int) -> bool:
        """Whether child `pid` ended with its server (no exit status came back)."""
        with self._changed:
            return pid in self._lost

    def describe_end(self) -> str:
        """How the server ended: 'was killed by SIGKILL', 'exited with status 1', 'ended'."""
        code = self.process.poll()
        if code is None:
            try:
                code = self.process.wait(timeout=1)
            except subprocess.TimeoutExpired:
                return "stopped answering"
        if not getattr(self.process, "status_known", True):
            return "ended"
        if code < 0:
            try:
                return f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"was killed by signal {-code}"
        return f"exited with status {code}"

    def alive(self) -> bool:
        return not self._gone and self.process.poll() is None

    def close(self) -> None:
        """End the server; it kills the children it still has."""
        self.ask_to_end()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def ask_to_end(self) -> None:
        """Tell the server to end (it kills its children and exits), without waiting."""
        try:
            self._socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._socket.close()

    def _send(self, message: dict[str, Any], fds: list[int]) -> None:
        data = json.dumps(message).encode("utf-8")
        if len(data) > MAX_MESSAGE_BYTES:
            raise ForkServerError(f"a request of {len(data)} bytes is over the fork server's "
                                  f"limit of {MAX_MESSAGE_BYTES}")
        try:
            socket.send_fds(self._socket, [data], fds)
        except OSError as error:
            raise ForkServerError(f"the fork server is gone ({error.strerror or error})") from error

    def _reply(self) -> dict[str, Any]:
        with self._changed:
            self._changed.wait_for(lambda: self._replies or self._gone)
            if self._replies:
                return self._replies.pop(0)
        raise ForkServerError("the fork server is gone")

    def _receive_blocking(self, timeout: float) -> dict[str, Any]:
        self._socket.settimeout(timeout)
        try:
            data = self._socket.recv(MAX_MESSAGE_BYTES)
        except socket.timeout as error:
            self.close()
            raise ForkServerError(f"the fork server did not start within {timeout:g} s") from error
        finally:
            self._socket.settimeout(None)
        if not data:
            code = self.process.wait()
            raise ForkServerError(f"the fork server exited with status {code} before it was ready")
        return json.loads(data)

    def _read(self) -> None:
        while True:
            try:
                data = self._socket.recv(MAX_MESSAGE_BYTES)
            except OSError:
                data = b""
            with self._changed:
                if not data:
                    self._gone = True
                    self._changed.notify_all()
                    return
                message = json.loads(data)
                if message.get("op") == "exit":
                    self._exits[int(message["pid"])] = int(message["returncode"])
                else:
                    self._replies.append(message)
                self._changed.notify_all()


def shared_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """What a server's children share: the environment less the per-child variables."""
    return {name: value for name, value in environment.items() if name not in PER_CHILD_VARIABLES}


def server_key(modules: Sequence[str], environment: Mapping[str, str]) -> tuple:
    return tuple(modules), tuple(sorted(shared_environment(environment).items()))


def names_own_folder(environment: Mapping[str, str], folders: Sequence[str]) -> bool:
    """Whether a variable outside the per-child ones points into the child's own folders."""
    return any(folder and folder in value for name, value in environment.items()
               if name not in PER_CHILD_VARIABLES for folder in folders)


class ForkServers:
    """The runner's fork servers, one per (modules, shared environment), started on demand."""

    def __init__(self, on_start=None, on_end=None, pool: Optional[Path] = None) -> None:
        """`pool`: the folder of a server pool (--server-pool) the servers are forked from,
        None for servers of the runner's own."""
        self._pool = pool
        self._pool_failure_told = False
        self._servers: dict[tuple, ForkServer] = {}
        self._lock = threading.Lock()
        self._on_start = on_start
        #: Told each server's pid once it has ended (its number may then be reused).
        self._on_end = on_end

    def _ended(self, server: ForkServer) -> None:
        if self._on_end is not None:
            self._on_end(server.pid)

    def _new_server(self, modules: Sequence[str], environment: Mapping[str, str]) -> ForkServer:
        if self._pool is not None:
            try:
                return ForkServer(modules, environment, pool=self._pool)
            except (PoolError, ForkServerError) as error:
                if not self._pool_failure_told:
                    self._pool_failure_told = True
                    log.warning("%s; this runner starts fork servers of its own", error)
        return ForkServer(modules, environment)

    def server_for(self, modules: Sequence[str], environment: Mapping[str, str],
                   cuda: bool = False) -> ForkServer:
        """The server for children of this environment (started if need be); ForkServerError
        when it cannot start, or when `cuda` children are asked of a server whose children
        could not use CUDA."""
        key = server_key(modules, environment)
        with self._lock:
            server = self._servers.get(key)
            if server is not None and not server.alive():
                server.close()
                self._ended(server)
                server = None
            if server is None:
                log.debug("starting a fork server preloading %s", ", ".join(modules))
                server = self._new_server(modules, shared_environment(environment))
                if self._on_start is not None:
                    self._on_start(server)
                self._servers[key] = server
        if cuda and not server.info.get("cuda_fork_safe", True):
            raise ForkServerError(f"the fork server preloading {', '.join(modules)} started the "
                                  "CUDA driver, so its children could not use CUDA")
        return server

    def prestart(self, wanted: Sequence[tuple[Sequence[str], Mapping[str, str]]]) -> None:
        """Start the servers of these (modules, environment) pairs that are not running, all
        at once, and wait until they are ready: their imports share the cores instead of
        coming one after the other in the sweep. A server that cannot start is left to
        `server_for`, which tries again and reports it."""
        with self._lock:
            missing = {}
            for modules, environment in wanted:
                key = server_key(modules, environment)
                if key not in self._servers:
                    missing.setdefault(key, (tuple(modules), shared_environment(environment)))
        if not missing:
            return
        started: dict[tuple, ForkServer] = {}

        def start(key: tuple, modules: tuple[str, ...], environment: dict[str, str]) -> None:
            try:
                started[key] = self._new_server(modules, environment)
            except ForkServerError as error:
                log.debug("prestarting a fork server: %s", error)

        threads = [threading.Thread(target=start, args=(key, *pair), daemon=True)
                   for key, pair in missing.items()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for key, server in started.items():
            with self._lock:
                if key in self._servers:
                    server.close()
                    continue
                if self._on_start is not None:
                    self._on_start(server)
                self._servers[key] = server

    def warm(self, wanted: Sequence[tuple[Sequence[str], Mapping[str, str]]]) -> int:
        """With a pool: start the templates of these (modules, environment) pairs whose
        servers are not running and whose template does not run either, without waiting for
        their imports (forkserver_pool.warm_template). The number started."""
        if self._pool is None:
            return 0
        missing = {}
        with self._lock:
            for modules, environment in wanted:
                key = server_key(modules, environment)
                if key not in self._servers:
                    missing.setdefault(key, (tuple(modules), shared_environment(environment)))
        started = 0
        for modules, environment in missing.values():
            try:
                started += warm_template(self._pool, modules, environment)
            except PoolError as error:
                log.debug("warming the server pool: %s", error)
        return started

    def close(self) -> None:
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:  # all end at once
            server.ask_to_end()
        for server in servers:
            server.close()
            self._ended(server)
