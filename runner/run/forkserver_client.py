"""Children that start fast: a preloaded fork server per stack family.

A fork server is a Python process that imports a stack family's libraries once (torch, and
torch_xla or jax where the stack needs them) and then forks one child per request. The
child takes its own session, its own output pipe, folder and environment, and runs
`runner.worker` as a spawned interpreter would; the server reaps it and tells the runner
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

The server side runs as `python -m runner.forkserver FD MODULES`; it speaks JSON messages
over a SOCK_SEQPACKET socket, the child's output pipe travelling with its request.
"""

from __future__ import annotations

import atexit
import importlib
import json
import logging
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from typing import IO, Any, Mapping, Optional, Sequence

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
START_METHODS = ("forkserver", "spawn")
#: Read lazily by torch, triton and the CUDA runtime, so a forked child may set them itself.
PER_CHILD_VARIABLES = frozenset({"TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
                                 "CUDA_VISIBLE_DEVICES"})
#: The runner's own modules a server imports too (no import-time side effects): all a
#: child imports before it loads its model, so that no child pays for them.
PROJECT_MODULES = ("runner.worker", "runner.probe", "runner.timing", "runner.trust",
                   "runner.observers.session", "backends", "backends.runtimes.precision",
                   "models", "core.contract")
MAX_MESSAGE_BYTES = 1 << 20
SERVER_START_TIMEOUT_SECONDS = 300.0
#: torch.cuda.is_available() through NVML while a server imports: inductor asks it at import
#: time, and the CUDA runtime's answer would start the driver, which no forked child may
#: inherit (torch then refuses CUDA in every child: "Cannot re-initialize CUDA in forked
#: subprocess").
NVML_CHECK_VARIABLE = "PYTORCH_NVML_BASED_CUDA_CHECK"


class ForkServerError(RuntimeError):
    """A fork server could not start or answer."""


# The runner's side.

class ForkedChild:
    """A child forked by a server: the subset of subprocess.Popen the executor uses."""

    def __init__(self, server: "ForkServer", pid: int, stdout: IO[bytes]) -> None:
        self.server, self.pid, self.stdout = server, pid, stdout
        self.returncode: Optional[int] = None

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

    def __init__(self, modules: Sequence[str], environment: Mapping[str, str]) -> None:
        self.modules = tuple(modules)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "runner.forkserver", str(theirs.fileno()),
                 ",".join(self.modules)],
                pass_fds=[theirs.fileno()], env=dict(environment), cwd=str(PROJECT_ROOT),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
        finally:
            theirs.close()
        self._socket = ours
        self._requests = threading.Lock()
        self._changed = threading.Condition()
        self._replies: list[dict[str, Any]] = []
        self._exits: dict[int, int] = {}
        self._gone = False
        ready = self._receive_blocking(SERVER_START_TIMEOUT_SECONDS)
        if "error" in ready:
            self.close()
            raise ForkServerError(f"the fork server could not preload {', '.join(self.modules)}: "
                                  f"{ready['error']}")
        self.info = ready
        self._reader = threading.Thread(target=self._read, name="forkserver-reader", daemon=True)
        self._reader.start()

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
                return -signal.SIGKILL  # its server died; the child died with it
            return None

    def alive(self) -> bool:
        return not self._gone and self.process.poll() is None

    def close(self) -> None:
        """End the server; it kills the children it still has."""
        try:
            self._socket.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._socket.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

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

    def __init__(self, on_start=None) -> None:
        self._servers: dict[tuple, ForkServer] = {}
        self._lock = threading.Lock()
        self._on_start = on_start

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
                server = None
            if server is None:
                log.debug("starting a fork server preloading %s", ", ".join(modules))
                server = ForkServer(modules, shared_environment(environment))
                if self._on_start is not None:
                    self._on_start(server)
                self._servers[key] = server
        if cuda and not server.info.get("cuda_fork_safe", True):
            raise ForkServerError(f"the fork server preloading {', '.join(modules)} started the "
                                  "CUDA driver, so its children could not use CUDA")
        return server

    def close(self) -> None:
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.close()


# The server's side.

def _preload(modules: Sequence[str]) -> None:
    previous = os.environ.get(NVML_CHECK_VARIABLE)
    os.environ[NVML_CHECK_VARIABLE] = "1"
    try:
        for name in list(modules) + list(PROJECT_MODULES):
            importlib.import_module(name)
        import backends
        import models
        from runner.probe import installed_packages

        # The registries' plug-in modules: imported by discovery, which children repeat.
        backends.all_stacks()
        models.suite_names()
        installed_packages()
    finally:
        if previous is None:
            os.environ.pop(NVML_CHECK_VARIABLE, None)
        else:
            os.environ[NVML_CHECK_VARIABLE] = previous


def children_may_use_cuda() -> bool:
    """Whether a child forked now could use CUDA: False once this process has started the
    CUDA driver (torch marks every forked child as a bad fork then). Forks a probe."""
    torch = sys.modules.get("torch")
    if torch is None:
        return True
    pid = os.fork()
    if pid == 0:
        os._exit(1 if torch.cuda._is_in_bad_fork() else 0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _state() -> dict[str, Any]:
    """What this process holds: the checks that nothing device- or compiler-bound was made."""
    state: dict[str, Any] = {"pid": os.getpid(),
                             "threads": len(os.listdir("/proc/self/task"))
                             if os.path.isdir("/proc/self/task") else None,
                             "modules": sorted(name for name in ("torch", "torch_xla", "jax",
                                                                 "torchax", "torch._dynamo")
                                               if name in sys.modules)}
    torch = sys.modules.get("torch")
    if torch is not None:
        state["cuda_initialized"] = bool(torch.cuda.is_initialized())
        state["cuda_fork_safe"] = children_may_use_cuda()
    dynamo = sys.modules.get("torch._dynamo.utils")
    if dynamo is not None:
        state["dynamo_frames_compiled"] = sum(dict(dynamo.counters.get("frames", {})).values())
    torch_xla = sys.modules.get("torch_xla")
    if torch_xla is not None:
        state["xla_runtime_initialized"] = bool(torch_xla._XLAC._xla_runtime_is_initialized())
    jax_bridge = sys.modules.get("jax._src.xla_bridge")
    if jax_bridge is not None:
        state["jax_backends_initialized"] = bool(getattr(jax_bridge, "_backends", None))
    return state


def _send_message(sock: socket.socket, message: dict[str, Any]) -> None:
    try:
        sock.send(json.dumps(message).encode("utf-8"))
    except OSError:
        pass  # the runner is gone; the loop ends when it reads end of file


def _run_forked_child(request: dict[str, Any], output_fd: int, closing: Sequence[int]) -> None:
    """In the forked child: become what a spawned worker would be, run it, never return."""
    code = 1
    try:
        os.setsid()
        for fd in closing:
            os.close(fd)
        signal.set_wakeup_fd(-1)
        for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(number, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.close(output_fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["environment"])
        sys.argv = [request["module"], *request["argv"]]
        module = importlib.import_module(request["module"])
        code = module.main(request["argv"])
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()  # what a normal interpreter exit would run (XLA's shutdown)
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code if isinstance(code, int) else 1)


def serve(sock: socket.socket, modules: Sequence[str]) -> int:
    from runner.worker import die_with_parent

    die_with_parent()
    try:
        _preload(modules)
    except BaseException as error:
        _send_message(sock, {"error": f"{type(error).__name__}: {error}"})
        return 1
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ready = _state()
    ready["ready"] = True
    _send_message(sock, ready)
    children: set[int] = set()
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    while True:
        for key, _ in selector.select():
            if key.fileobj == wake_read:
                try:
                    while os.read(wake_read, 512):
                        pass
                except BlockingIOError:
                    pass
                _reap(sock, children)
                continue
            try:
                data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE_BYTES, 4)
            except OSError:
                data, fds = b"", []
            if not data:
                for pid in children:
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except OSError:
                        pass
                return 0
            request = json.loads(data)
            if request.get("op") == "status":
                _send_message(sock, _state())
                continue
            try:
                pid = os.fork()
            except OSError as error:
                for fd in fds:
                    os.close(fd)
                _send_message(sock, {"error": f"fork failed: {error.strerror or error}"})
                continue
            if pid == 0:
                selector.close()
                _run_forked_child(request, fds[0], [sock.fileno(), wake_read, wake_write])
            for fd in fds:
                os.close(fd)
            children.add(pid)
            _send_message(sock, {"op": "forked", "pid": pid})
            _reap(sock, children)


def _reap(sock: socket.socket, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        _send_message(sock, {"op": "exit", "pid": pid,
                             "returncode": os.waitstatus_to_exitcode(status)})


def main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[0]))
    modules = [name for name in argv[1].split(",") if name] if len(argv) > 1 else []
    return serve(sock, modules)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
