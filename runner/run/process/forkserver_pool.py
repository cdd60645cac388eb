"""Fork servers without the import: preloaded templates that outlive their runner
(--server-pool DIR).

Starting a fork server means importing its stack's libraries: about 2.5 s of a core for
torch and dynamo, paid by every runner invocation, however short. With a pool, the first
runner that wants a server of some (modules, environment) starts a *template*: a process
that imports them once and stays. Each later server of the same key, in this runner or
any later one, is a fork of the template (ready in 35 to 60 ms on a 2-core machine) and
serves its runner exactly as a server started by it would
(runner/run/process/forkserver_server.py): the runner's children are forked from it, it
ends with its runner, and the guard kills its group.

A template:
- listens on an abstract Unix socket named after its key (the pool folder, the
  interpreter, the project, the modules, the environment less the per-child and
  per-runner variables and the probe's outcomes for inductor, and what its children
  inherit: resource limits, umask, priority, control group), and answers only processes
  of its own user;
- gives each forked server the runner's environment and cores, so that its children see
  the runner's TMPDIR and guard token, not the template's, and the probe's outcomes the
  runner was given (an eager sweep has none, a compiling one has them: both fork from one
  template);
- ends when unused for IDLE_SECONDS; when MAX_TEMPLATES others were used since it was
  (a runner that starts a template ends the least recently used); and when a file of a
  module it loaded has changed since it loaded it (the asking runner then starts a fresh
  one): a pool never serves code older than what is on disk. A file of the project with a
  new time and the same content (a checkout copied again) has not changed;
- ends when the pool's folder is removed;
- keeps its log (its import's failure, say) in DIR/NAME.log, its pid in DIR/NAME.pid, and
  what it is keyed on in DIR/NAME.key (each value as a digest): a runner that starts a
  template logs what the nearest running one of the same modules differs in.

A template imports the libraries among the modules to preload; the project's own modules
(a suite's builder, which imports its libraries lazily) are imported by each server forked
from it, before its first child: the sweeps of the builtin, faults and TorchBench suites
then fork from one template of their stack.

Figures do not depend on it: a child of a pooled server is forked from the same preloaded
modules as one of a server of its own. Run as `python -m runner.run.process.forkserver_pool
DIR NAME IDLE_SECONDS MODULES`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import logging
import os
import resource
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from backends.runtimes.inductor_host import PROBE_OUTCOME_VARIABLES, apply_probe_outcomes
from core.files.cached_json import write_json_atomically
from core.host.import_folders import plain_folders, shadowing, top_level_modules
from runner.run.process.forkserver_server import (MAX_MESSAGE_BYTES, _preload, freeze_preloaded,
                                                  send_message, serve_preloaded)
from runner.run.process.guard import PROJECT_ROOT, TOKEN_VARIABLE

#: A template unused this long ends.
IDLE_SECONDS = 600.0
#: The most templates a pool keeps: a runner that starts one more ends the least recently
#: used. Each holds its stack's libraries: 0.5 to 0.75 GB resident, of which 0.3 to 0.4 GB
#: its own share (PSS; torch, then torch with dynamo, inductor and transformers).
MAX_TEMPLATES = 12
#: How often a template checks that its pool's folder is still there (removing the folder
#: ends its templates).
FOLDER_CHECK_SECONDS = 2.0
#: Set by each runner for its own children (and so its server), never read at import.
PER_RUNNER_VARIABLES = frozenset({"TMPDIR", TOKEN_VARIABLE})
#: Variables that no library a template preloads reads at import (a forked server takes its
#: runner's values, as it takes TMPDIR): the proxies (read when a request is made), the
#: shell's own (the command it ran, the working folder, the nesting: the same runner started
#: from another folder, or as `experiment-runner` rather than `python experiment_runner.py`,
#: started a template of its own), the login session's (an SSH connection's addresses and
#: port, its terminal, the session's and a terminal multiplexer's pane ids: each new login
#: started one), Ray's (a Ray worker's, its temporary folder and its usage reports; the
#: templates import no Ray) and pytest's. A template keyed without them serves runners that
#: differ only there, as the runners of each test against a Ray cluster of its own do.
NOT_READ_AT_IMPORT = frozenset({f"{name}_proxy" for name in ("http", "https", "no", "all")}
                               | {f"{name}_PROXY" for name in ("HTTP", "HTTPS", "NO", "ALL")}
                               | {"_", "PWD", "OLDPWD", "SHLVL"}
                               | {"SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY", "SSH_AUTH_SOCK",
                                  "XDG_SESSION_ID", "TERM_SESSION_ID", "WINDOWID", "TMUX_PANE",
                                  "STY", "WINDOW"})
NOT_READ_AT_IMPORT_PREFIXES = ("RAY_", "PYTEST_")
#: Read at import, but applied again by each forked server from its runner's environment
#: (backends/runtimes/inductor_host.py): the probe's outcomes for inductor.
APPLIED_BY_EACH_SERVER = PROBE_OUTCOME_VARIABLES
#: How long a runner waits for a template it started to listen (it does so before it
#: imports anything heavy), and for a template's answer (its import included).
LISTEN_TIMEOUT_SECONDS = 30.0
ANSWER_TIMEOUT_SECONDS = 300.0
_CREDENTIALS = struct.Struct("3i")  # SO_PEERCRED: pid, uid, gid


log = logging.getLogger(__name__)


class PoolError(RuntimeError):
    """The pool could not give a server (the runner then starts one of its own)."""


def template_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """What a template imports under: `environment` (a server's) less the per-runner
    variables and those no preloaded library reads at import."""
    return {name: value for name, value in environment.items()
            if name not in PER_RUNNER_VARIABLES and name not in NOT_READ_AT_IMPORT
            and name not in APPLIED_BY_EACH_SERVER
            and not name.startswith(NOT_READ_AT_IMPORT_PREFIXES)}


def inherited_context() -> dict[str, Any]:
    """What a forked process inherits besides its environment and sets for its children
    (resource limits, umask, priority, control group): a template started by this runner
    has this runner's, so that the children of its servers run under them too."""
    umask = os.umask(0)
    os.umask(umask)
    try:
        cgroup = Path("/proc/self/cgroup").read_text()
    except OSError:
        cgroup = ""
    return {"limits": {name: resource.getrlimit(getattr(resource, name))
                       for name in sorted(dir(resource)) if name.startswith("RLIMIT_")},
            "umask": umask, "priority": os.getpriority(os.PRIO_PROCESS, 0), "cgroup": cgroup}


def template_name(pool: Path, modules: Sequence[str], environment: Mapping[str, str]) -> str:
    """The socket name of the template for these modules and this (server's) environment,
    in this runner's inherited context."""
    key = json.dumps([os.path.realpath(pool), sys.executable, str(PROJECT_ROOT), list(modules),
                      sorted(template_environment(environment).items()), inherited_context()])
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]
    return f"experiment-runner-{os.getuid()}-{digest}"


class PooledProcess:
    """A pooled server as the runner sees it: not its child, so watched through a pidfd;
    its exit status is not known (`status_known`), only that it ended."""

    status_known = False

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: Optional[int] = None
        try:
            self._fd: Optional[int] = os.pidfd_open(pid)
        except ProcessLookupError:
            self._fd, self.returncode = None, 0

    def poll(self) -> Optional[int]:
        if self.returncode is None and self._fd is not None:
            if select.select([self._fd], [], [], 0)[0]:
                self._ended()
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        if self.returncode is None and self._fd is not None:
            if not select.select([self._fd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(f"pooled fork server {self.pid}", timeout or 0)
            self._ended()
        return self.returncode or 0

    def kill(self) -> None:
        if self.returncode is None and self._fd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._fd, signal.SIGKILL)

    def _ended(self) -> None:
        self.returncode = 0
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def import_path(environment: Mapping[str, str]) -> list[str]:
    """The entries of PYTHONPATH in `environment`."""
    return [entry for entry in environment.get("PYTHONPATH", "").split(os.pathsep) if entry]


def with_import_path(environment: Mapping[str, str], entries: Sequence[str]) -> dict[str, str]:
    """`environment` with PYTHONPATH made of `entries` (none: without it)."""
    changed = {name: value for name, value in environment.items() if name != "PYTHONPATH"}
    if entries:
        changed["PYTHONPATH"] = os.pathsep.join(entries)
    return changed


def plain_entries(environment: Mapping[str, str]) -> list[str]:
    """The PYTHONPATH folders of `environment` a template may be keyed without: absolute
    folders that hold no distribution (core/host/import_folders.py); whether they hold a
    module the template imported is known once it has."""
    return plain_folders([entry for entry in import_path(environment) if os.path.isabs(entry)])


def template_modules(pool: Path, name: str) -> Optional[list[str]]:
    """The top-level modules the template `name` imported (DIR/NAME.modules), if it says."""
    try:
        found = json.loads((Path(pool) / f"{name}.modules").read_text())
    except (OSError, ValueError):
        return None
    return [str(module) for module in found] if isinstance(found, list) else None


def split_project_modules(modules: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the libraries among `modules`, the project's own): a module is the project's where
    its top-level package or module lies in the project's folder."""
    def own(name: str) -> bool:
        top = name.split(".", 1)[0]
        return (PROJECT_ROOT / top).is_dir() or (PROJECT_ROOT / f"{top}.py").is_file()

    return ([name for name in modules if not own(name)], [name for name in modules if own(name)])


def pooled_server(pool: Path, modules: Sequence[str], environment: Mapping[str, str],
                  ) -> tuple[socket.socket, PooledProcess]:
    """Our end of a new server's socket (its ready message is the first to come) and its
    process: forked by the pool's template for `modules` under `environment`, a template
    started first where none runs. PoolError where none could be had.

    The template is keyed without the plain folders of PYTHONPATH that hold none of the
    modules it imported (a bisected commit's tree, say): the points of a bisection then
    fork from one template, and each server puts its runner's folders on its import path.
    A folder that does hold one (a checkout of torch) keys a template of its own."""
    modules, own = split_project_modules(modules)
    key, name = _template_for(pool, modules, environment)
    request = json.dumps({"op": "server", "runner": os.getpid(),
                          "cores": sorted(os.sched_getaffinity(0)),
                          "environment": dict(environment), "modules": own}).encode("utf-8")
    for _ in range(3):  # a template that ended meanwhile (stale, idle) is started again
        connection = _connect(name) or _start_template(pool, name, modules, key)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with connection:
                socket.send_fds(connection, [request], [theirs.fileno()])
                connection.settimeout(ANSWER_TIMEOUT_SECONDS)
                answer = connection.recv(MAX_MESSAGE_BYTES)
        except OSError:
            answer = b""
        finally:
            theirs.close()
        reply = json.loads(answer) if answer else {}
        if "pid" in reply:
            server = PooledProcess(int(reply["pid"]))
            shadowed = _without_shadows(pool, modules, environment,
                                        template_modules(pool, name) or [])
            if shadowed[1] == name:
                return ours, server
            # A folder left out of the key holds a module the template imported: that
            # template is not this runner's. Its server goes; the right one is asked.
            server.kill()
            ours.close()
            key, name = shadowed
            continue
        ours.close()
        if "error" in reply:
            raise PoolError(f"the server pool's template could not fork: {reply['error']}")
    raise PoolError(f"the server pool's template {name} ended before it answered "
                    f"(its log: {Path(pool) / (name + '.log')})")


def warm_template(pool: Path, modules: Sequence[str], environment: Mapping[str, str]) -> bool:
    """Start the template that `pooled_server` would fork a server of `modules` under
    `environment` from, where none listens, and return once it listens (before its imports):
    True where one was started. PoolError where the pool cannot be used."""
    modules, _ = split_project_modules(modules)
    key, name = _template_for(pool, modules, environment)
    connection = _connect(name)
    started = connection is None
    if started:
        connection = _start_template(pool, name, modules, key)
    connection.close()
    return started


def _template_for(pool: Path, libraries: Sequence[str], environment: Mapping[str, str],
                  ) -> tuple[dict[str, str], str]:
    """The key environment and name of the template for `libraries` under `environment`."""
    # Before a template says what it imported: what this runner did (its own code) and
    # the modules to preload.
    key, name = _without_shadows(pool, libraries, environment, top_level_modules(sys.modules))
    imported = template_modules(pool, name)
    if imported is not None:
        key, name = _without_shadows(pool, libraries, environment, imported)
    return key, name


def _without_shadows(pool: Path, modules: Sequence[str], environment: Mapping[str, str],
                     imported: Sequence[str]) -> tuple[dict[str, str], str]:
    """The key environment and template name for `environment`: without the plain folders
    of its PYTHONPATH that hold none of the top-level modules `imported` (and of the modules
    to preload)."""
    plain = plain_entries(environment)
    shadows = set(shadowing(plain, {*imported, *top_level_modules(modules)}))
    left_out = set(plain) - shadows
    key = with_import_path(environment, [entry for entry in import_path(environment)
                                         if entry not in left_out]) if left_out else dict(environment)
    return key, template_name(pool, modules, key)


def _connect(name: str) -> Optional[socket.socket]:
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        connection.connect("\0" + name)
    except OSError:
        connection.close()
        return None
    return connection


def _start_template(pool: Path, name: str, modules: Sequence[str],
                    environment: Mapping[str, str],
                    idle_seconds: float = IDLE_SECONDS) -> socket.socket:
    """Start the template `name` (its first process exits once it listens; another
    runner's may win the name) and connect to it."""
    folder = Path(pool)
    scratch = folder / "tmp"
    try:
        scratch.mkdir(parents=True, exist_ok=True)
        _make_room(folder, MAX_TEMPLATES - 1)
    except OSError as error:  # the default pool's folder too: the runner starts its own
        raise PoolError(f"the server pool's folder {folder} cannot be used: "
                        f"{error.strerror or error}") from error
    variables = template_environment(environment)
    fingerprint = template_fingerprint(modules, environment)
    log.info("server pool: a template for %s starts (%s)", ",".join(modules) or "no modules",
             nearest_difference(folder, fingerprint))
    write_json_atomically(folder / f"{name}.key", fingerprint)
    variables["TMPDIR"] = str(scratch)
    try:
        starter = subprocess.Popen(
            [sys.executable, "-m", "runner.run.process.forkserver_pool", str(folder), name,
             f"{idle_seconds:g}", ",".join(modules)],
            env=variables, cwd=str(PROJECT_ROOT), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        starter.wait(timeout=LISTEN_TIMEOUT_SECONDS)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise PoolError(f"the server pool's template did not start: {error}") from error
    connection = _connect(name)
    if connection is None:
        raise PoolError(f"the server pool's template {name} does not listen "
                        f"(its log: {folder / (name + '.log')})")
    return connection


def _short_digest(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=6).hexdigest()


def template_fingerprint(modules: Sequence[str], environment: Mapping[str, str],
                         ) -> dict[str, Any]:
    """What a template is keyed on, each variable's and inherited setting's value as a short
    digest (DIR/NAME.key: the values themselves, a token say, stay out of the pool's folder)."""
    return {"modules": sorted(modules), "interpreter": sys.executable,
            "project": str(PROJECT_ROOT),
            "variables": {name: _short_digest(value)
                          for name, value in template_environment(environment).items()},
            "inherited": {name: _short_digest(value)
                          for name, value in inherited_context().items()}}


def fingerprint_difference(one: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    """What two templates' fingerprints differ in: `interpreter`, `project`, each variable
    by name, each inherited setting as `inherited:NAME`."""
    found = [part for part in ("interpreter", "project") if one.get(part) != other.get(part)]
    for section, prefix in (("variables", ""), ("inherited", "inherited:")):
        mine, theirs = one.get(section) or {}, other.get(section) or {}
        found += [prefix + name for name in sorted(set(mine) | set(theirs))
                  if mine.get(name) != theirs.get(name)]
    return found


def nearest_difference(folder: Path, fingerprint: Mapping[str, Any]) -> str:
    """Why the pool has no template for `fingerprint`: what the nearest running template of
    the same modules was keyed on otherwise, or that none imports them."""
    nearest: Optional[list[str]] = None
    for key_file in folder.glob("*.key"):
        if not key_file.with_suffix(".pid").exists():
            continue
        try:
            other = json.loads(key_file.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(other, dict) or other.get("modules") != fingerprint["modules"]:
            continue
        found = fingerprint_difference(fingerprint, other)
        if nearest is None or len(found) < len(nearest):
            nearest = found
    if nearest is None:
        return "no running template of the pool imports these modules"
    return ("the nearest running template of these modules differs in: "
            + (", ".join(nearest) or "nothing it records"))


def _make_room(folder: Path, keep: int) -> None:
    """End the pool's least recently used templates (by their pid files' times, which each
    use renews) but `keep`."""
    found = []
    for pid_file in folder.glob("*.pid"):
        with contextlib.suppress(OSError, ValueError):
            found.append((pid_file.stat().st_mtime, pid_file, int(pid_file.read_text())))
    found.sort(reverse=True)
    for _, pid_file, pid in found[keep:]:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            command = []
        # The pid may be another process's by now: only the template of that name is ended.
        if pid_file.stem.encode() in command:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        with contextlib.suppress(OSError):
            pid_file.unlink()


# The template's side.


@dataclass
class LoadedFile:
    """A loaded module's file as the template loaded it: its modification time and size,
    and for the project's own modules a digest of its content."""

    mtime_ns: int
    size: int
    digest: Optional[bytes] = None


def _digest(path: str) -> bytes:
    with open(path, "rb") as handle:
        return hashlib.blake2b(handle.read(), digest_size=16).digest()


def _is_project_source(path: str) -> bool:
    """Whether `path` is a Python source of the project's own (not of a virtual environment
    kept in the project's folder)."""
    return (path.endswith(".py") and path.startswith(os.path.join(PROJECT_ROOT, ""))
            and not path.startswith(os.path.join(sys.prefix, "")))


def _loaded_files() -> dict[str, LoadedFile]:
    """Every loaded module's file, with the digests of the project's own sources (80 files,
    5 ms, for a compiling stack's template)."""
    found = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path:
            with contextlib.suppress(OSError):
                info = os.stat(path)
                found[path] = LoadedFile(info.st_mtime_ns, info.st_size,
                                         _digest(path) if _is_project_source(path) else None)
    return found


def _changed(files: Mapping[str, LoadedFile]) -> Optional[str]:
    """The first file whose content may differ from what was loaded, else None. A project
    file with a new time but the same content (a checkout copied afresh, a branch checked
    out and back) has not changed: its new time is kept, so the next check is a stat again."""
    for path, seen in files.items():
        try:
            info = os.stat(path)
        except OSError:
            return path
        if (info.st_mtime_ns, info.st_size) == (seen.mtime_ns, seen.size):
            continue
        if seen.digest is None or info.st_size != seen.size:
            return path
        try:
            same = _digest(path) == seen.digest
        except OSError:
            return path
        if not same:
            return path
        seen.mtime_ns = info.st_mtime_ns
    return None


def _log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} [{os.getpid()}] {message}", flush=True)


def _same_user(connection: socket.socket) -> bool:
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                        _CREDENTIALS.size)
    return _CREDENTIALS.unpack(credentials)[1] == os.getuid()


def _become_server(request: dict[str, Any], fd: int, template: int) -> None:
    """In a fork of the template: serve the asking runner, then exit."""
    code = 1
    try:
        os.setsid()
        for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(number, signal.SIG_DFL)
        template_path = import_path(os.environ)
        os.environ.clear()
        os.environ.update(request["environment"])
        adopt_import_path(template_path, import_path(os.environ))
        apply_probe_outcomes(os.environ)
        tempfile.tempdir = None  # the runner's TMPDIR, not the template's
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, request["cores"])  # the runner's cores, as a spawned child
        try:
            runner = os.pidfd_open(int(request["runner"]))
        except ProcessLookupError:
            os._exit(0)

        def runner_alive() -> bool:
            return not select.select([runner], [], [], 0)[0]

        sock = socket.socket(fileno=fd)
        try:
            for name in request.get("modules", []):
                importlib.import_module(name)
        except BaseException as error:  # told as a server of its own tells it (ForkServer)
            send_message(sock, {"error": f"{type(error).__name__}: {error}"})
            os._exit(1)
        if request.get("modules"):
            freeze_preloaded()
        code = serve_preloaded(sock, runner_alive, {"template": template})
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def adopt_import_path(template_entries: Sequence[str], runner_entries: Sequence[str]) -> None:
    """Make sys.path that of a process started under the runner's PYTHONPATH: the
    template's PYTHONPATH folders (which follow sys.path[0]) replaced by the runner's, which
    hold them and the plain folders the template was keyed without."""
    if list(template_entries) == list(runner_entries):
        return
    template = [os.path.abspath(entry) for entry in template_entries]
    runner = [os.path.abspath(entry) for entry in runner_entries]
    if sys.path[1:1 + len(template)] == template:
        sys.path[1:1 + len(template)] = runner
    else:
        sys.path[1:1] = [entry for entry in runner if entry not in sys.path]
    importlib.invalidate_caches()


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def serve_pool(listener: socket.socket, folder: Path, pid_file: Path, modules: Sequence[str],
               idle_seconds: float) -> int:
    """Preload `modules`, then fork a server for each runner that asks, until unused for
    `idle_seconds`, until a loaded file changes, or until the pool's folder is gone."""
    try:
        _preload(modules)
    except BaseException:
        _log(f"could not preload {', '.join(modules)}:\n{traceback.format_exc()}")
        return 1
    freeze_preloaded()
    files = _loaded_files()
    _log(f"preloaded {', '.join(modules) or 'the project'} ({len(files)} files)")
    # What runners check their plain import folders against (pooled_server).
    write_json_atomically(folder / f"{pid_file.stem}.modules", top_level_modules(sys.modules))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    last_used = time.monotonic()
    while True:
        _reap()
        left = idle_seconds - (time.monotonic() - last_used)
        if left <= 0:
            _log(f"unused for {idle_seconds:g} s: ending")
            return 0
        if not folder.is_dir():
            return 0  # the pool was removed: so are its templates
        try:
            readable = select.select([listener], [], [], min(left, FOLDER_CHECK_SECONDS))[0]
        except InterruptedError:
            continue
        if not readable:
            continue
        try:
            connection, _ = listener.accept()
        except OSError:
            continue
        last_used = time.monotonic()
        with connection:
            if not _same_user(connection):
                continue
            connection.settimeout(10)
            try:
                data, fds, _, _ = socket.recv_fds(connection, MAX_MESSAGE_BYTES, 1)
            except OSError:
                continue
            if not data or not fds:
                for fd in fds:
                    os.close(fd)
                continue
            with contextlib.suppress(OSError):
                os.utime(pid_file)  # the least recently used templates end first
            changed = _changed(files)
            if changed is not None:
                _log(f"{changed} changed since it was loaded: ending")
                os.close(fds[0])
                return 0  # the asking runner starts a fresh template
            try:
                pid = os.fork()
            except OSError as error:
                os.close(fds[0])
                with contextlib.suppress(OSError):
                    connection.send(json.dumps({"error": f"fork failed: {error}"}).encode())
                continue
            if pid == 0:
                listener.close()
                connection.close()
                _become_server(json.loads(data), fds[0], os.getppid())
            os.close(fds[0])
            with contextlib.suppress(OSError):
                connection.send(json.dumps({"pid": pid}).encode("utf-8"))


def main(argv: list[str]) -> int:
    folder, name, idle_seconds = Path(argv[0]), argv[1], float(argv[2])
    modules = [module for module in argv[3].split(",") if module] if len(argv) > 3 else []
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        listener.bind("\0" + name)
    except OSError:
        return 0  # another runner's template has the name: the runner connects to it
    listener.listen(64)
    if os.fork():
        return 0  # the starting runner waits for this: the template listens
    log_file = os.open(folder / f"{name}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log_file, 1)
    os.dup2(log_file, 2)
    os.close(log_file)
    pid_file = folder / f"{name}.pid"
    pid_file.write_text(f"{os.getpid()}\n")
    try:
        return serve_pool(listener, folder, pid_file, modules, idle_seconds)
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            pid_file.unlink()
        with contextlib.suppress(OSError):
            (folder / f"{name}.modules").unlink()
        with contextlib.suppress(OSError):
            (folder / f"{name}.key").unlink()


if __name__ == "__main__":
    status = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
