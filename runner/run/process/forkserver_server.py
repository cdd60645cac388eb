"""The fork server's side: preload a stack family's libraries, then fork one child per request
(ahead of it: each child waits as a spare until its request comes).

Run by the runner (runner/run/process/forkserver_client.py) as
`python -m runner.run.process.forkserver_server FD MODULES`: FD is its end of a SOCK_SEQPACKET socket,
MODULES the comma-separated modules it imports before it forks. Each forked child takes its
own session, output pipe, folder and environment, and runs `MODULE.main(argv)` as a spawned
interpreter would; the server reaps it and tells the runner its exit status.

The server ends with its runner: its socket reads end of file when the runner is gone
(however it ended), and it checks its parent every `PARENT_CHECK_SECONDS` besides. It does
not use PR_SET_PDEATHSIG, which fires when the *thread* that started the server ends: with
`--jobs`, a pool thread that started a server and ended first (a stopped sweep) took the
server, and the children of other threads with it, which then looked killed by SIGKILL.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import os
import platform
import selectors
import signal
import socket
import sys
import tempfile
import traceback
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

#: The runner's own modules a server imports too (no import-time side effects): all a
#: child imports before it loads its model, so that no child pays for them.
PROJECT_MODULES = ("child.worker", "core.packages", "child.timing",
                   "child.trust", "child.reference", "child.workload",
                   "child.settings", "observers", "observers.session",
                   "backends", "backends.runtimes.precision", "backends.runtimes.torch_device",
                   "models", "core.contract")
#: What the exit functions of a preloaded module import in each child, as each child runs
#: them: torch._dynamo's tabulates the compile times (dump_compile_times, whose INFO line is
#: dropped at our log levels) with `tabulate`, 10 to 17 ms a child on a loaded 2-core machine.
EXIT_IMPORTS = {"torch._dynamo.utils": ("tabulate",)}
MAX_MESSAGE_BYTES = 1 << 20
PARENT_CHECK_SECONDS = 2.0
#: torch.cuda.is_available() through NVML while a server imports: inductor asks it at import
#: time, and the CUDA runtime's answer would start the driver, which no forked child may
#: inherit (torch then refuses CUDA in every child: "Cannot re-initialize CUDA in forked
#: subprocess").
NVML_CHECK_VARIABLE = "PYTORCH_NVML_BASED_CUDA_CHECK"


def _preload(modules: Sequence[str]) -> None:
    previous = os.environ.get(NVML_CHECK_VARIABLE)
    os.environ[NVML_CHECK_VARIABLE] = "1"
    try:
        for name in list(modules) + list(PROJECT_MODULES):
            importlib.import_module(name)
        import backends
        import models
        from backends.runtimes.inductor_host import COMPILER_MODULE, prepare_compiling_server
        from core.packages import installed_packages
        from observers import all_observers

        if COMPILER_MODULE in sys.modules:
            prepare_compiling_server(os.environ)
        for loaded, needed in EXIT_IMPORTS.items():
            if loaded in sys.modules:
                for name in needed:
                    with contextlib.suppress(ImportError):
                        importlib.import_module(name)
        # The registries' plug-in modules: imported by discovery, which children repeat.
        backends.all_stacks()
        models.suite_names()
        all_observers()
        installed_packages()  # kept: the children read the versions the server found
        # Each child's line names its platform; the first answer reads the interpreter's own
        # file for its C library (about 5 ms), and the answer is cached for the children.
        platform.platform()
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


def send_message(sock: socket.socket, message: dict[str, Any]) -> None:
    """One message (JSON) to the runner at the other end of `sock`, if it is still there."""
    try:
        sock.send(json.dumps(message).encode("utf-8"))
    except OSError:
        pass  # the runner is gone; the loop ends when it reads end of file


def _leave_finalizers_to_the_server() -> None:
    """The server's weak-reference finalizers stay the server's: a forked child does not run
    them at its exit. They are torch.library's registrations (about 140, 20 ms of a quiet
    core per child, several times that on loaded ones) and the temporary folders of the
    libraries the server imported, which a child would remove under the server. Such a
    folder's exit function goes too (torch.distributed.nn's registers one at import: the
    first child removed the server's folder, 4 ms). The finalizers a child makes itself
    still run; so do the other exit functions (XLA's shutdown)."""
    for finalizer in list(getattr(weakref.finalize, "_registry", {})):
        finalizer.atexit = False
        held = finalizer.peek()
        if held is not None and isinstance(held[0], tempfile.TemporaryDirectory):
            atexit.unregister(held[0].cleanup)


def _run_forked_child(request: dict[str, Any], output_fd: int) -> None:
    """In a spare given its request: become what a spawned worker would be, run it, never
    return."""
    code = 1
    _leave_finalizers_to_the_server()
    try:
        os.setsid()
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
        _end_output()
    finally:
        os._exit(code if isinstance(code, int) else 1)


def _end_output() -> None:
    """End the child's output before its exit: the runner takes that, with its result, as a
    CPU experiment's child being done, and goes on while the kernel tears down the process
    (10 ms and more for one that loaded torch; runner/run/process/supervision.py)."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)


def serve(sock: socket.socket, modules: Sequence[str]) -> int:
    parent = os.getppid()
    try:
        _preload(modules)
    except BaseException as error:
        send_message(sock, {"error": f"{type(error).__name__}: {error}"})
        return 1
    freeze_preloaded()
    return serve_preloaded(sock, lambda: os.getppid() == parent)


def freeze_preloaded() -> None:
    """The preloaded objects out of the collector's sight: a child's collections would walk
    them all, touching (and so copying) the pages the fork let it share with the server."""
    gc.collect()
    gc.freeze()


def serve_preloaded(sock: socket.socket, runner_alive: Callable[[], bool],
                    extra_state: Optional[dict[str, Any]] = None) -> int:
    """Fork children for the runner at the other end of `sock` until it closes it or
    `runner_alive` says it is gone (checked every PARENT_CHECK_SECONDS); the modules are
    loaded already. `extra_state` joins the ready message."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ready = _state()
    ready.update(extra_state or {})
    ready["ready"] = True
    send_message(sock, ready)
    children: set[int] = set()
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    # What a child closes of the server's: its socket, its wake-up pipe and its selector.
    closing = (sock.fileno(), wake_read, wake_write, selector.fileno())
    spare = _next_spare(closing)
    try:
        while True:
            events = selector.select(timeout=PARENT_CHECK_SECONDS)
            if not runner_alive():  # the runner is gone (its socket may outlive it)
                _kill_all(children)
                return 0
            for key, _ in events:
                if key.fileobj == wake_read:
                    _drain(wake_read)
                    spare = _reap(sock, children, spare)
                    continue
                try:
                    data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE_BYTES, 4)
                except OSError:
                    data, fds = b"", []
                if not data:
                    _kill_all(children)
                    return 0
                if json.loads(data).get("op") == "status":
                    send_message(sock, _state())
                    continue
                try:
                    pid = _start_child(spare, data, fds, closing)
                except OSError as error:
                    send_message(sock, {"error": f"fork failed: {error.strerror or error}"})
                    continue
                finally:
                    spare = None  # handed the request, or gone
                    for fd in fds:
                        os.close(fd)
                children.add(pid)
                send_message(sock, {"op": "forked", "pid": pid})
                # The next request's child, forked now, while this one sets itself up.
                spare = _reap(sock, children, _next_spare(closing))
    finally:
        if spare is not None:
            spare.kill()


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _start_child(spare: Optional["Spare"], data: bytes, fds: list[int],
                 closing: Sequence[int]) -> int:
    """The pid of the child that runs the request `data` (its output pipe in `fds`): the
    spare, or a new one where it is gone or none was ready; OSError where none can be
    forked."""
    if spare is not None:
        try:
            return spare.hand_over(data, fds)
        except OSError:
            pass  # the spare is gone: a new one takes the request
    return Spare.fork(closing).hand_over(data, fds)


def _next_spare(closing: Sequence[int]) -> Optional["Spare"]:
    """A spare for the next request, or None where none can be forked now (that request
    then forks its own, or says why it cannot)."""
    try:
        return Spare.fork(closing)
    except OSError:
        return None


@dataclass
class Spare:
    """A child forked ahead of its request: it waits on `channel` for the request (and its
    output pipe), then runs it (`_run_forked_child`). Forking the server's preloaded
    libraries copies their page tables (about 10 ms on a 2-core machine with torch and
    dynamo loaded), which a spare pays while the previous child sets itself up instead of
    while the runner waits for the next child to start. Every child starts as a spare."""

    pid: int
    channel: socket.socket

    @classmethod
    def fork(cls, closing: Sequence[int]) -> "Spare":
        """A new spare, which lets go of the server's files `closing`; OSError where it
        cannot be forked."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            pid = os.fork()
        except OSError:
            ours.close()
            theirs.close()
            raise
        if pid == 0:
            ours.close()
            _wait_for_request(theirs, closing)
        theirs.close()
        return cls(pid, ours)

    def hand_over(self, data: bytes, fds: list[int]) -> int:
        """Give the spare its request; its pid, or OSError where it is gone (it is ended)."""
        try:
            socket.send_fds(self.channel, [data], fds)
        except OSError:
            self.kill()
            raise
        self.channel.close()
        return self.pid

    def kill(self) -> None:
        """End a spare that got no request (it exits when its channel closes, too)."""
        self.channel.close()
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)


def _wait_for_request(channel: socket.socket, closing: Sequence[int]) -> None:
    """In a spare: let go of the server's files and signal handlers (so that the runner sees
    the server's end when it comes), wait for the request, then run it; exit where the
    server ends first."""
    try:
        signal.set_wakeup_fd(-1)
        for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(number, signal.SIG_DFL)
        for fd in closing:
            os.close(fd)
        data, fds, _, _ = socket.recv_fds(channel, MAX_MESSAGE_BYTES, 4)
        channel.close()
    except BaseException:
        os._exit(1)
    if not data or not fds:
        os._exit(0)
    _run_forked_child(json.loads(data), fds[0])


def _kill_all(children: set[int]) -> None:
    for pid in children:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


def _reap(sock: socket.socket, children: set[int], spare: Optional[Spare]) -> Optional[Spare]:
    """Tell the runner the exit status of each child that ended; returns the spare, or None
    where it ended (nobody asked for it: nothing is told)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return spare
        if pid == 0:
            return spare
        if spare is not None and pid == spare.pid:
            spare.channel.close()
            spare = None
            continue
        children.discard(pid)
        send_message(sock, {"op": "exit", "pid": pid,
                             "returncode": os.waitstatus_to_exitcode(status)})


def main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[0]))
    modules = [name for name in argv[1].split(",") if name] if len(argv) > 1 else []
    return serve(sock, modules)


if __name__ == "__main__":
    # Ended at once, without the interpreter's teardown: a server holds nothing to flush or
    # release (no device state, no files of its own; its children are killed), and tearing
    # down the modules of torch and torch_xla took the runner 0.3 to several seconds per
    # server at the end of every sweep.
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
