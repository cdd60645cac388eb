"""Find out what this machine can run, in a child process.

The parent must not start runtimes, and importing torch costs seconds, so one small child
imports torch (never torch_xla, torchax or jax) and reports versions, CUDA devices and the
registered dynamo backends as JSON. Package versions come from metadata, without importing.

The probe also runs, once, checks that every child would otherwise repeat at its own cost
(`compiler_checks`), and hands the children their outcome as variables. They concern CPU
compiles only and cost seconds (a C++ build and a Python child per vector ISA), so a sweep
that cannot compile on the CPU with inductor (`compiles_on_cpu`: a CUDA sweep, an eager one)
asks the probe without them, and starts its first child that much sooner.

The answer is kept for a day in the cache folder (`core.host.machine.cache_root()/host`), under a
key of everything it depends on: the interpreter, the import paths (each folder once, by its
real path) and the distributions installed in each, with their versions (installing,
upgrading or removing a package changes them; a folder holding neither a distribution nor
a module the probe imported, such as a bisected commit's tree, is left out: `answer_path`), the C++ compiler, the device nodes
(/dev/nvidia*, /dev/accel*, /dev/vfio/*), the variables that choose devices, and the boot.
Not the folders' modification times, which any file made in the project's folder changed,
and not how sys.path spells a folder: a runner started as `python -c` ("" for the working
folder) or called in-process (the project's folder listed twice) keyed apart from the
script's and probed again. A module copied into an import path without its distribution's
metadata goes unseen for the day the answer is kept; `--no-probe-cache` asks the child again.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import json
import logging
import os
import platform
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Collection, Iterator, Optional, Sequence

import psutil
from filelock import FileLock, Timeout

from core.host.import_folders import plain_folders, shadowing, top_level_modules
from core.host.machine import HostCapabilities, cache_root
from core.files.cached_json import write_json_atomically
from core.lifetime import die_with_parent
from core.files.side_files import (a_bool, a_string, an_object, an_optional_string,
                                      read_side_file, string_map, strings)
from core.packages import installed_packages
from runner.plan.project import PROJECT_ROOT

log = logging.getLogger(__name__)

def probe_in_this_process(with_compiler_checks: bool = True) -> dict[str, Any]:
    """The probe's answer (run inside the probe child)."""
    answer: dict[str, Any] = {"python": platform.python_version(), "packages": installed_packages()}
    try:
        import torch
    except Exception as error:  # a broken torch is reported, not raised
        answer["torch_error"] = f"{type(error).__name__}: {error}"
        return answer
    answer["torch_version"] = torch.__version__
    answer["cuda_available"] = bool(torch.cuda.is_available())
    if answer["cuda_available"]:
        answer["cuda_device_names"] = [
            torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())
        ]
    try:
        answer["dynamo_backends"] = sorted(torch._dynamo.list_backends(exclude_tags=()))
    except Exception as error:
        log.debug("dynamo backends unknown: %s", error)
    if with_compiler_checks:
        answer["child_environment"] = compiler_checks()
    answer["compiler_checked"] = with_compiler_checks
    answer["top_level_modules"] = top_level_modules(sys.modules)
    return answer


def compiler_checks() -> dict[str, str]:
    """Inductor's CPU vector-ISA checks, made once for the host: the variables that spare
    every child the same checks, or {} when they cannot be settled here.

    Before its first CPU kernel, inductor builds and loads a small program for each vector
    ISA the CPU lists, and for some of their extensions (a C++ build and a Python child that
    imports torch, per check), into its cache folder. Each of our children has a fresh cache
    folder, so each paid this again: seconds of every CPU compile time, which a user's warm
    cache never shows. When every ISA the CPU lists passes here, TORCHINDUCTOR_VEC_ISA_OK=1
    makes inductor skip the first check of each, and the outcomes of all of them
    (backends.runtimes.inductor_host.py) answer the rest in each child; when one fails,
    children keep checking.

    The outcome is kept for a day (`isa_checks_path`), apart from the answer: a probe asked
    again for another reason (another import path, a package installed) does not build the
    checks' programs again while torch, the compiler and the CPU stay the same."""
    kept_path = isa_checks_path()
    kept = read_side_file(kept_path, lambda data: string_map(data, "the checks"),
                          "the kept vector-ISA checks").value
    with contextlib.suppress(OSError):
        if kept is not None and time.time() - kept_path.stat().st_mtime < PROBE_CACHE_SECONDS:
            return kept
    checks = made_compiler_checks()
    with contextlib.suppress(OSError):  # not kept: the next probe checks again
        kept_path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomically(kept_path, checks)
    return checks


def isa_checks_path() -> Path:
    """Where the vector-ISA checks' outcome is kept: under a key of what it depends on (the
    torch inductor comes with, the C++ compiler, the CPU's flags, the boot)."""
    import torch

    try:
        flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("flags")), "")
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        flags, boot = platform.processor(), ""
    identity = {"torch": [os.path.realpath(torch.__file__), torch.__version__],
                "compiler": compiler_identity(), "cpu": [platform.machine(), flags],
                "boot": boot}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]
    return cache_root() / "host" / f"isa-checks-{key}.json"


def made_compiler_checks() -> dict[str, str]:
    """compiler_checks, made here and now."""
    scratch = tempfile.mkdtemp(prefix="experiment-runner-isa-")
    previous = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = scratch
    try:
        from backends.runtimes.inductor_host import ISA_CHECKS_VARIABLE, checked_isas

        listed, working, outcomes = checked_isas()
    except Exception as error:  # inductor's internals moved: children check for themselves
        log.debug("inductor's vector-ISA check not made: %s", error)
        return {}
    finally:
        if previous is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = previous
        shutil.rmtree(scratch, ignore_errors=True)
    if listed and listed == working:
        return {"TORCHINDUCTOR_VEC_ISA_OK": "1",
                ISA_CHECKS_VARIABLE: json.dumps(outcomes, sort_keys=True)}
    log.debug("vector ISAs listed %s, working %s: children check for themselves", listed, working)
    return {}


PROBE_CACHE_SECONDS = 24 * 3600
#: Variables that change which devices the probe child sees.
DEVICE_VARIABLES = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "PJRT_DEVICE",
                    "TPU_VISIBLE_CHIPS", "JAX_PLATFORMS", "LD_LIBRARY_PATH", "PYTHONPATH")


def import_roots(entries: list[str], site_folders: list[str]) -> list[str]:
    """The entries of `entries` (sys.path) but those inside one of `site_folders` (where
    packages are installed): such a folder is one a library put on sys.path inside its own
    installation (ray adds its `thirdparty_files` when imported), so that a runner which
    imported it keys the probe as one which did not. The site folders themselves stay."""
    sites = [os.path.abspath(folder).rstrip(os.sep) + os.sep for folder in site_folders]
    return [entry for entry in entries
            if not any(os.path.abspath(entry or ".").startswith(site) for site in sites)]


#: The module of torch that puts a fresh temporary folder of its own on sys.path as it is
#: imported (torch._dynamo imports it), `INSTANTIATED_TEMPLATE_DIR_PATH`.
TORCH_TEMPLATE_MODULE = "torch.distributed.nn.jit.instantiator"


def library_temporary_folders() -> list[str]:
    """The folders libraries this process imported put on sys.path for themselves, fresh
    ones per process: a process that imported them keys the probe as one that did not (the
    runner's parent never imports torch; a process that runs sweeps in-process does)."""
    folder = getattr(sys.modules.get(TORCH_TEMPLATE_MODULE), "INSTANTIATED_TEMPLATE_DIR_PATH", None)
    return [folder] if isinstance(folder, str) else []


def site_folders() -> list[str]:
    """This interpreter's folders of installed packages (its environment's and the user's)."""
    return [*site.getsitepackages(), site.getusersitepackages()]


def unique_folders(entries: list[str]) -> list[str]:
    """`entries` (import paths; "" is the working folder) as real paths, each once, in order."""
    return list(dict.fromkeys(os.path.realpath(entry or ".") for entry in entries))


def installed_distributions(folder: str) -> list[str]:
    """The distributions installed in `folder`, sorted: the names of their metadata folders
    (a .dist-info's holds the name and the version), a .egg-info's with its Version line.

    Read from the folder's listing, not through importlib.metadata, whose distributions each
    parse their METADATA: 111 ms against 0.2 ms for this environment's 110, on every start of
    the runner (the key is worked out before the cached answer is read)."""
    try:
        with os.scandir(folder) as entries:
            names = sorted(entry.name for entry in entries
                           if entry.name.endswith((".dist-info", ".egg-info")))
    except OSError:
        return []
    return [f"{name} {egg_info_version(os.path.join(folder, name))}"
            if name.endswith(".egg-info") else name for name in names]


def egg_info_version(path: str) -> str:
    """The Version line of a .egg-info (a folder holding PKG-INFO, or the file itself)."""
    try:
        with open(os.path.join(path, "PKG-INFO") if os.path.isdir(path) else path,
                  encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
                if not line.strip():  # the headers end here
                    break
    except OSError:
        pass
    return ""


def import_folders() -> list[str]:
    """The folders of this process's import path the probe's answer is keyed by (PYTHONPATH's
    among them), each once, by its real path."""
    own = set(library_temporary_folders())
    return unique_folders(import_roots([entry for entry in sys.path if entry not in own],
                                       site_folders()))


def probe_key(leave_out: Collection[str] = ()) -> str:
    """What the probe's answer depends on, hashed, less the import folders `leave_out`
    (plain folders that hold nothing the probe imported: `probe_host`). The package versions
    are in it through the distributions' folder names (`installed_distributions`), not
    asked again of importlib.metadata (6 to 10 ms of the runner's start for the same facts)."""
    folders = [folder for folder in import_folders() if folder not in leave_out]
    paths = [(folder, installed_distributions(folder)) for folder in folders]
    variables = {name: os.environ.get(name) for name in DEVICE_VARIABLES}
    if variables["PYTHONPATH"]:  # the same folders, however often and however spelled
        variables["PYTHONPATH"] = [folder for folder in unique_folders(
            variables["PYTHONPATH"].split(os.pathsep)) if folder not in leave_out]
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    devices = sorted(glob.glob("/dev/nvidia*") + glob.glob("/dev/accel*") + glob.glob("/dev/vfio/*"))
    identity = {"executable": sys.executable, "python": sys.version, "paths": paths,
                "compiler": compiler_identity(), "devices": devices, "boot": boot,
                "variables": variables}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]


def compiler_identity() -> Optional[tuple[str, int]]:
    """The C++ compiler inductor would run (CXX, else g++) and its modification time: a new
    compiler asks the probe's compiler checks again."""
    found = shutil.which(os.environ.get("CXX") or "g++")
    if found is None:
        return None
    try:
        return (os.path.realpath(found), os.stat(found).st_mtime_ns)
    except OSError:
        return None


def probe_cache_path(leave_out: Collection[str] = ()) -> Path:
    return cache_root() / "host" / f"{probe_key(leave_out)}.json"


def answer_shape(data: Any) -> HostCapabilities:
    """The probe's answer as the cache keeps it, checked field by field (a cached answer
    that says `"dynamo_backends": "inductor"` does not fit: read as a list of letters, it
    would drop inductor from the plan without a word)."""
    answer = an_object(data, "the answer")
    checks = {"python": a_string, "torch_version": an_optional_string,
              "cuda_available": a_bool, "cuda_device_names": strings,
              "dynamo_backends": strings, "packages": string_map,
              "torch_error": an_optional_string, "child_environment": string_map,
              "compiler_checked": a_bool, "top_level_modules": strings}
    for name, check in checks.items():
        if name in answer:
            check(answer[name], name)
    return HostCapabilities.from_dict(dict(answer))


def cached_answer(path: Path, with_compiler_checks: bool = True) -> Optional[HostCapabilities]:
    """The cached answer at `path` if it is younger than a day and made the compiler checks
    where they are wanted; one that does not fit its shape is set aside with a warning (and
    the probe runs again)."""
    try:
        if time.time() - path.stat().st_mtime > PROBE_CACHE_SECONDS:
            return None
    except OSError as error:
        if error.errno != errno.ELOOP:  # a link that loops is set aside below, with a warning
            return None
    answer = read_side_file(path, answer_shape, "the probe's cached answer").value
    if answer is not None and with_compiler_checks and not answer.compiler_checked:
        return None
    return answer


def keep_answer(path: Path, answer: dict[str, Any]) -> None:
    """Write the answer atomically; a cache that cannot be written is only logged."""
    try:
        write_json_atomically(path, answer)
    except OSError as error:
        log.debug("the probe's answer was not cached: %s", error)


def compiles_on_cpu(dimensions: dict[str, tuple]) -> bool:
    """Whether a sweep asking for these values of the matrix's dimensions (by field name; a
    dimension not named takes every value) may compile with inductor on the CPU: only then
    are the probe's compiler checks worth their seconds."""
    accelerators, dynamos = dimensions.get("accelerator"), dimensions.get("dynamo")
    return ((not accelerators or "cpu" in accelerators)
            and (not dynamos or "inductor" in dynamos))


def speculative_host() -> HostCapabilities:
    """What a runner takes this host to be before the probe answers, to start meanwhile
    what its sweep will most likely need: the installed packages (from their metadata),
    torch at its installed version, a CUDA device where the CUDA device nodes are, and
    every dynamo backend. Never a basis for what runs: the probe's answer decides."""
    packages = installed_packages()
    return HostCapabilities(python=platform.python_version(), torch_version=packages.get("torch"),
                            cuda_available=bool(glob.glob("/dev/nvidia[0-9]*")),
                            packages=packages)


def probe_host(timeout: float = 300.0, use_cache: bool = True,
               with_compiler_checks: bool = True,
               while_probing: Optional[Callable[[], object]] = None) -> HostCapabilities:
    """What this machine can run: the cached answer when it still holds, else the probe
    child's (failures give a torch-less answer, never cached). Runners that start together
    on one host probe once: the others wait for the first one's answer. Without compiler
    checks, a cached answer that made them serves as well. `while_probing` is called once
    the probe child has started (not where a cached answer serves), while it runs."""
    if not use_cache:
        return HostCapabilities.from_dict(run_probe(timeout, with_compiler_checks, while_probing))
    plain = plain_folders(import_folders())
    index = probe_cache_path(plain)
    with probing_alone(index, timeout):
        path = answer_path(plain=plain)
        cached = cached_answer(path, with_compiler_checks)
        if cached is not None:
            log.debug("host capabilities from %s", path)
            return cached
        answer = run_probe(timeout, with_compiler_checks, while_probing)
        if "torch_error" not in answer:
            keep_answer(answer_path(answer.get("top_level_modules") or (), plain), answer)
            if plain:
                keep_answer(index, answer)
    return HostCapabilities.from_dict(answer)


def answer_path(imported: Optional[Sequence[str]] = None,
                plain: Optional[list[str]] = None) -> Path:
    """Where the probe's answer for this process is kept: keyed without the plain import
    folders (`plain`, by default this process's) that hold none of the top-level modules
    `imported`.

    Plain folders (a bisected commit's tree on PYTHONPATH) key no answer of their own unless
    they hold a module the probe imported (core/host/import_folders.py). Which modules those
    are (`imported` when not given), the answer kept without every plain folder says: it is
    kept there too, so that each run of one environment finds it, whatever plain folders
    it has."""
    if plain is None:
        plain = plain_folders(import_folders())
    if imported is None:
        indexed = cached_answer(probe_cache_path(plain), with_compiler_checks=False) \
            if plain else None
        imported = indexed.top_level_modules if indexed is not None else ()
    if not imported:
        return probe_cache_path()
    shadows = set(shadowing(plain, imported))
    return probe_cache_path([folder for folder in plain if folder not in shadows])


@contextlib.contextmanager
def probing_alone(path: Path, timeout: float) -> Iterator[None]:
    """Hold the lock of the probe's cached answer at `path` (`<path>.lock`); where it cannot
    be taken (a cache folder that cannot be written, or another runner holding it longer
    than a probe may take), go on without it: the probe then runs twice, harmlessly."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(f"{path}.lock", timeout=timeout)
        lock.acquire()
    except (OSError, Timeout) as error:
        log.debug("probing without the lock of %s: %s", path, error)
        yield
        return
    try:
        yield
    finally:
        lock.release()


#: Names the probe's parent in the probe child's environment: the child ends itself when
#: it finds another parent (its runner died before it asked to die with it).
PARENT_VARIABLE = "EXPERIMENT_RUNNER_PROBE_PARENT"


def probe_scratch() -> Path:
    """A scratch folder for the probe child's temporary files (its TMPDIR), named as the
    runner's scratch roots are (runner/run/process/scratch.py: `experiment-runner-<pid>-<start>-`),
    so that a runner starting later removes it when this one was killed meanwhile."""
    stamp = int(psutil.Process().create_time())
    return Path(tempfile.mkdtemp(prefix=f"experiment-runner-{os.getpid()}-{stamp}-probe-"))


#: Tells the probe child to leave out the compiler checks.
NO_COMPILER_CHECKS = "--no-compiler-checks"


def run_probe(timeout: float, with_compiler_checks: bool = True,
              while_probing: Optional[Callable[[], object]] = None) -> dict[str, Any]:
    """Run the probe child: its answer, or a torch-less one saying why it gave none.

    The child runs in a session of its own with its temporary files in a scratch folder;
    however the probe ends (a timeout, SIGTERM or Ctrl-C to the runner), its whole group
    is killed and the folder removed. A runner killed outright takes its probe child with
    it (the child dies with its parent), and the next runner removes the folder."""
    scratch = probe_scratch()
    environment = dict(os.environ, TMPDIR=str(scratch), **{PARENT_VARIABLE: str(os.getpid())})
    # the project first on its import path: a runner started from another folder, not installed
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(PROJECT_ROOT)] + ([environment["PYTHONPATH"]] if environment.get("PYTHONPATH") else []))
    environment.pop("PYTHONWARNINGS", None)  # as the runner's children: the user's filter
    try:
        command = [sys.executable, "-m", "runner.plan.probe"]
        if not with_compiler_checks:
            command.append(NO_COMPILER_CHECKS)
        child = subprocess.Popen(command,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=environment, start_new_session=True)
        try:
            if while_probing is not None:
                _call_while_probing(while_probing)
            stdout, stderr = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"packages": installed_packages(),
                    "torch_error": f"the probe took over {timeout:.0f} s"}
        finally:
            _kill_group(child)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    try:
        answer = json.loads(stdout.strip().splitlines()[-1])
        if isinstance(answer, dict):
            return answer
    except (ValueError, IndexError):
        pass
    tail = stderr.strip()[-500:]
    return {"packages": installed_packages(),
            "torch_error": f"the probe exited with {child.returncode}: {tail}"}


def _call_while_probing(work: Callable[[], object]) -> None:
    """Run `work` beside the probe child; its failure costs the probe nothing (logged)."""
    try:
        work()
    except Exception as error:  # what runs meanwhile is an optimization, never the answer
        log.debug("beside the probe: %s", error, exc_info=True)


def _kill_group(child: subprocess.Popen) -> None:
    """Kill the probe child's session (it and whatever it started), and reap the child."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        child.wait(timeout=10)
    except subprocess.TimeoutExpired:
        log.debug("the probe child %d did not end", child.pid)


def _probe_child_main() -> None:
    """The probe child: die with the runner, then print the answer as one JSON line."""
    die_with_parent()
    if os.environ.get(PARENT_VARIABLE) not in (None, str(os.getppid())):
        sys.exit(1)  # the runner died before this child could ask to die with it
    print(json.dumps(probe_in_this_process(NO_COMPILER_CHECKS not in sys.argv[1:])))


if __name__ == "__main__":
    _probe_child_main()
