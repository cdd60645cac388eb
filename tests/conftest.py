"""Shared fixtures: run the real CLI in a child process and read what it wrote.

Tests come in two tiers. The end-to-end tier (marked `e2e`) holds every test that starts a
process: the CLI, the executor's children, fork servers, the probe child, Ray, a compiler
that inductor runs, a browser. The unit tier (everything else) starts none: `process_guard`
below makes a process started by a unit test (or by a fixture it sets up) fail that test.
"""

from __future__ import annotations

import _posixsubprocess
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from core.files.results_file import read_results

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class ProcessStartInUnitTier(RuntimeError):
    """A test of the unit tier (not marked e2e) tried to start a process."""


class ProcessGuard:
    """Replaces every way Python starts a process (subprocess's fork_exec, multiprocessing's,
    os.fork, os.posix_spawn, os.system, ...) with a check: while `test` names a unit-tier test,
    starting a process raises ProcessStartInUnitTier and is recorded in `attempts`, so that
    the test fails even where the code under test catches the error."""

    STARTERS = (
        (subprocess, "_fork_exec"),  # subprocess.Popen, run, check_output, os.popen
        (_posixsubprocess, "fork_exec"),  # multiprocessing's spawn and forkserver starts
        (os, "fork"), (os, "forkpty"),  # multiprocessing's fork start, os.spawn*, pty
        (os, "posix_spawn"), (os, "posix_spawnp"),  # subprocess's posix_spawn path
        (os, "system"),
    )

    def __init__(self) -> None:
        self.test: str | None = None
        self.attempts: list[str] = []
        self.originals: dict[tuple[Any, str], Any] = {}

    def install(self) -> None:
        for owner, name in self.STARTERS:
            original = getattr(owner, name, None)
            if original is None or (owner, name) in self.originals:
                continue
            self.originals[(owner, name)] = original
            setattr(owner, name, self.checked(f"{owner.__name__}.{name}", original))

    def uninstall(self) -> None:
        for (owner, name), original in self.originals.items():
            setattr(owner, name, original)
        self.originals.clear()

    def checked(self, what: str, original):
        def start(*args, **kwargs):
            if self.test is not None:
                self.attempts.append(what)
                raise ProcessStartInUnitTier(
                    f"{self.test} started a process ({what}) but is in the unit tier: mark it "
                    "@pytest.mark.e2e (tests/conftest.py), or keep the process out of it")
            return original(*args, **kwargs)

        return start


PROCESS_GUARD = ProcessGuard()


@pytest.fixture(scope="session", autouse=True)
def process_guard():
    """Unit-tier tests may start no process (the pytest_runtest_* wrappers below arm the
    guard for each test, its fixtures' setup included, unless the test is marked e2e)."""
    PROCESS_GUARD.install()
    yield PROCESS_GUARD
    PROCESS_GUARD.uninstall()


def guarded_phase(item):
    """Arm the guard for this phase of a unit-tier test; fail it on any attempt, caught or not."""
    if item.get_closest_marker("e2e") is not None:
        return (yield)
    PROCESS_GUARD.test, PROCESS_GUARD.attempts = item.nodeid, []
    try:
        result = yield
    finally:
        PROCESS_GUARD.test = None
    if PROCESS_GUARD.attempts:
        raise ProcessStartInUnitTier(
            f"{item.nodeid} started a process ({', '.join(PROCESS_GUARD.attempts)}) but is in "
            "the unit tier: mark it @pytest.mark.e2e (tests/conftest.py)")
    return result


#: How many threads torch computes with in the pytest workers' own tests. With a test per
#: core and one more, torch's default of a thread per core had each worker's tests wait at
#: barriers for a thread that another worker's test held off its core. tests/child,
#: tests/backends and tests/verifier (325 tests, pytest -n 3 on 2 cores), A B A B: 126.7 and
#: 127.2 s (244 and 234 CPU-s) at torch's default, 98.0 and 113.1 s (186 and 214 CPU-s) with
#: one thread. Runners, their children and the reference harness are processes of their own
#: and keep their threads (TEST_RUN_FLAGS, or their defaults); inductor's compile workers are
#: left as they are (tests/backends/test_torch_device.py starts them).
WORKER_TORCH_THREADS = 1


def compute_in_the_workers_threads() -> None:
    """WORKER_TORCH_THREADS for torch in this process, once a test (or the collection)
    imported it; a test that changed it leaves the next one WORKER_TORCH_THREADS."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != WORKER_TORCH_THREADS:
        torch.set_num_threads(WORKER_TORCH_THREADS)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    compute_in_the_workers_threads()
    return (yield from guarded_phase(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from guarded_phase(item))


@dataclass
class CliRun:
    returncode: int
    stdout: str
    stderr: str
    output_dir: Path

    @property
    def results_path(self) -> Path:
        return self.output_dir / "results.jsonl"

    def lines(self) -> list[dict[str, Any]]:
        return read_results(self.results_path).lines


#: The variable of the runners' --compile-cache (runner/plan/parser.py).
COMPILE_CACHE_VARIABLE = "EXPERIMENT_RUNNER_COMPILE_CACHE"
#: The variable of the runners' --server-pool (runner/plan/parser.py).
SERVER_POOL_VARIABLE = "EXPERIMENT_RUNNER_SERVER_POOL"

#: The folder of the runners' own cache (the probe's answer) during a test run.
TESTS_CACHE_PREFIX = "experiment-runner-tests-cache-"


#: Where pytest_configure keeps the tests' cache folder it made (none where it found one).
MADE_TESTS_CACHE = pytest.StashKey[str]()


def is_tests_cache(folder: str) -> bool:
    return os.path.basename(folder).startswith(TESTS_CACHE_PREFIX)


def pytest_configure(config) -> None:
    """pytest-xdist's workers ignore SIGINT, and a child inherits an ignored SIGINT (as a
    shell's background job does, on purpose): the tests that press Ctrl-C on a runner need
    the default back in the processes they start."""
    # --dist loadfile hands out files in the order of the collection, which
    # pytest_collection_modifyitems below makes long tests first; unless told otherwise,
    # pytest-xdist reorders them by their number of tests, most first, and the files of one
    # long test each ran last, on one worker, while the other had finished.
    if getattr(config.option, "loadscopereorder", None) is not None:
        config.option.loadscopereorder = False
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # The runners the tests start share one cache (the probe's answer) of their own, not
    # the user's: made by pytest (under pytest-xdist, the controller, whose environment the
    # workers inherit), so that every worker's runners find the one probe's answer. Only
    # the pytest that made it removes it (pytest_unconfigure): a pytest that a test starts
    # with this conftest (tests/test_process_guard.py) inherits the folder, and its removing
    # it at exit made the next runner of every worker probe again.
    if not is_tests_cache(os.environ.get("XDG_CACHE_HOME", "")):
        os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix=TESTS_CACHE_PREFIX)
        config.stash[MADE_TESTS_CACHE] = os.environ["XDG_CACHE_HOME"]
    # One compile cache for every runner of the test run (--compile-cache's variable):
    # a model that many tests compile the same way compiles from the cache after the first
    # time. A test of cold compiles gives --compile-cache=None.
    os.environ[COMPILE_CACHE_VARIABLE] = os.path.join(os.environ["XDG_CACHE_HOME"], "compile")
    # One server pool (--server-pool's variable) for every runner of the test run: a runner
    # forks its fork servers from the pool's templates instead of importing torch again
    # (about 2.5 s of a core per server, over a hundred servers a run). The templates end
    # with the folder (pytest_unconfigure). Tests of the servers' own start ask for None,
    # and so does a test run started with the variable set to None.
    os.environ.setdefault(SERVER_POOL_VARIABLE,
                          os.path.join(os.environ["XDG_CACHE_HOME"], "servers"))
    # The project on PYTHONPATH, as every process the tests start has it (cli_environment),
    # for pytest itself and (made here, by the controller) its workers: a runner called
    # in-process then keys the probe's answer as the runners it starts do (its import
    # paths and PYTHONPATH, runner/plan/probe.py), not once more for itself.
    entries = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    if str(PROJECT_ROOT) not in {os.path.realpath(entry) for entry in entries}:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT), *entries])
    # Variables that libraries put in os.environ as a test imports them (ray, at import:
    # RAY_CLIENT_MODE; the browser tests: SE_OFFLINE), set from the start at the values they
    # would get: every runner a worker starts then has one environment, before and after,
    # and forks its servers from the same templates.
    for name, value in LIBRARY_SET_VARIABLES.items():
        os.environ.setdefault(name, value)
    # Every process of the test run (the workers, the runners and their children, the
    # harness the fidelity tests run) waits at an OpenMP barrier by spinning only briefly.
    for name, value in {**CONTENDED_HOST_VARIABLES, **FAST_XLA_COMPILE_VARIABLES}.items():
        os.environ.setdefault(name, value)
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        write_rewritten_test_modules(config)


def write_rewritten_test_modules(config) -> None:
    """Before pytest-xdist starts its workers: pytest's rewritten bytecode of every test
    module and conftest under the test paths, where not current.

    pytest rewrites the assertions of each test module as it imports it, and keeps the result
    in __pycache__ unless bytecode writing is off, as it is where PYTHONDONTWRITEBYTECODE is
    set (CI's machines); then each worker rewrote all of them again, and so did the quiet
    tier's pytest after them: 4.8 CPU-s each, of a collection of 11 s (4.6 s with them).
    pytest reads such a file even where it may not write one, and only while it matches its
    module's source. This uses pytest's rewriter, which is not a public interface: where it
    is not as expected (another pytest), nothing is written and the workers rewrite as before.
    """
    if config.getoption("assertmode", "rewrite") != "rewrite":
        return
    try:
        from _pytest.assertion import rewrite
        from _pytest.pathlib import fnmatch_ex

        state = config.stash[rewrite.assertstate_key]
        patterns = config.getini("python_files")
        for root in config.getini("testpaths"):
            for module in sorted((config.rootpath / root).rglob("*.py")):
                if module.name != "conftest.py" and \
                        not any(fnmatch_ex(pattern, module) for pattern in patterns):
                    continue
                pyc = rewrite.get_cache_dir(module) / (module.name[:-3] + rewrite.PYC_TAIL)
                if rewrite._read_pyc(module, pyc) is None:
                    pyc.parent.mkdir(exist_ok=True)
                    source_hash, code = rewrite._rewrite_test(module, config)
                    rewrite._write_pyc(state, code, source_hash, pyc)
    except (ImportError, AttributeError, KeyError, TypeError, ValueError, OSError):
        return


def pytest_collection_modifyitems(config, items) -> None:
    """Tests marked `long` (minutes of compiling, or sweeps of many children) go first, then
    the rest of the end-to-end tier, then the unit tier, so that under pytest-xdist no worker
    starts a long one when the others are nearly done (--dist loadfile: a file goes where its
    first test goes). The files of tests marked `waits` are spread evenly among the other
    end-to-end files: each then waits while the other workers compile. In the tier's file
    order three of them met near its end, and all together right after the long ones: both
    times both cores were nearly idle for 15 to 35 s of a `make test` (the machine's busy
    time read every 5 s)."""
    items.sort(key=lambda item: (item.get_closest_marker("long") is None,
                                 item.get_closest_marker("e2e") is None))
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)
    def kind(group: list) -> str:
        if any(item.get_closest_marker("long") for item in group):
            return "long"
        if any(item.get_closest_marker("waits") for item in group):
            return "waits"
        return "e2e" if any(item.get_closest_marker("e2e") for item in group) else "unit"
    by_kind: dict[str, list] = {"long": [], "waits": [], "e2e": [], "unit": []}
    for group in files.values():
        by_kind[kind(group)].append(group)
    spread, waiting = list(by_kind["e2e"]), by_kind["waits"]
    step = len(spread) // (len(waiting) + 1) if waiting else 0
    for index, group in enumerate(waiting):
        spread.insert((index + 1) * step + index, group)
    items[:] = [item for group in (*by_kind["long"], *spread, *by_kind["unit"]) for item in group]


def pytest_unconfigure(config) -> None:
    folder = config.stash.get(MADE_TESTS_CACHE, None)
    if folder is not None:
        end_templates(Path(folder) / "servers")
        shutil.rmtree(folder, ignore_errors=True)


def end_templates(pool: Path) -> None:
    """End the server pool's templates now (each would end within seconds of its folder's
    removal anyway)."""
    for pid_file in pool.glob("*.pid"):
        with contextlib.suppress(ValueError, OSError):
            os.kill(int(pid_file.read_text()), signal.SIGTERM)


#: What every sweep a test starts is given, unless the test names the flag itself or asks
#: for the runner's own defaults (`runner_defaults=True`; for `run_cli`, the marker
#: `runner_defaults`), as the tests of threads, slots, contention and the reference workload
#: do. Both say how an experiment is measured, not what it is (core/config.py RunSettings):
#: - one torch thread per child: pytest-xdist runs a test per core (and one more), and a
#:   child with a thread per core of the two (the default) waited at each barrier of its
#:   thread pool for a thread that the other worker's child held off its core: measured on two copies of
#:   tests/cli/test_observe_cli.py side by side, 153 s of wall time with the default, 108 s
#:   with one thread;
#: - no reference workload (about 0.1 s on a quiet machine, seconds of both cores on a
#:   loaded one, twice per timing child): 98 s.
TEST_RUN_FLAGS = ("--threads=1", "--no-reference-workload")
#: What the runners the tests start find in their environment (a test's own value wins):
#: - inductor compiles in the child itself, not in a pool of compile workers (as many as
#:   the child has cores, each a process that imports torch): with a test per core, the
#:   pool's workers only take turns with the other worker's test, and starting them cost
#:   each compiling child CPU-seconds. The same kernels are built with the same flags.
#:   The runner's shutting the pool down is tested in tests/backends/test_torch_device.py.
TEST_RUN_VARIABLES = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
#: Subcommands, which read results and run nothing.
SUBCOMMANDS = frozenset({"report", "compare", "score"})


def flags_for_tests(args: tuple[str, ...]) -> list[str]:
    """TEST_RUN_FLAGS less those `args` give (any value) and less all for a subcommand."""
    if args and args[0] in SUBCOMMANDS:
        return []
    given = {arg.split("=", 1)[0] for arg in args}
    return [flag for flag in TEST_RUN_FLAGS if flag.split("=", 1)[0] not in given]


def cli_command(output_dir: Path, *args: str, runner_defaults: bool = False) -> list[str]:
    """The command that runs `experiment_runner.py ARGS` into `output_dir`, with
    TEST_RUN_FLAGS unless `runner_defaults`."""
    extra = [] if runner_defaults else flags_for_tests(args)
    return [
        sys.executable, str(PROJECT_ROOT / "experiment_runner.py"),
        "--output-dirname", str(output_dir), "--no-progress", *args, *extra,
    ]


#: Variables of the pytest worker that differ from test to test (pytest's current test, the
#: worker's name, an address inductor sets when a test imports it in the worker): no
#: runner reads them, and the server pool keys its templates by the environment, so that
#: with them every test's runners would import torch afresh.
PER_TEST_VARIABLES = frozenset({"PYTEST_CURRENT_TEST", "PYTEST_XDIST_WORKER",
                                "_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR"})
#: What libraries set in os.environ when a test imports them (pytest_configure sets them first).
LIBRARY_SET_VARIABLES = {"RAY_CLIENT_MODE": "0", "SE_OFFLINE": "true"}
#: How the test run's processes wait, on a host where they outnumber the cores (a test per
#: core and one more): a thread of torch's OpenMP pool (GNU libgomp) that reaches a barrier
#: first spins up to GOMP_SPINCOUNT times (300,000 by default) before it sleeps, while the
#: thread it waits for is off its core, held by another test's process. Here no thread
#: spins: it sleeps at once (the passive policy, libgomp's spin count 0). PyTorch's harness
#: training mobilenetv2_100 at batch 1 on the CPU (torch's two threads, to its first timed
#: call, benchmarks/fidelity/harness_settings.py) took 43 CPU-s alone at a spin of 10,000
#: and 25 with one thread; beside two busy loops 77 CPU-s at 10,000, 29 with no spin, 21 with
#: one thread. Threads, kernels and results are the same.
CONTENDED_HOST_VARIABLES = {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "0"}
#: XLA's CPU backend (torch_xla's PJRT and JAX's, for torchax) at optimization level 0, in
#: every process of the test run that does not give XLA_FLAGS of its own (an experiment's
#: --xla-flags replace them): the same programs, built without LLVM's optimizing passes. The
#: tests check what runs, what is verified and what is recorded, not the speed of XLA's code.
#: Serially, a PJRT training sweep of two builtin models took 35 to 65 CPU-s at the default
#: level and 8 to 26 at level 0 (warm caches and server pool; the same lines, verified alike).
FAST_XLA_COMPILE_VARIABLES = {"XLA_FLAGS": "--xla_backend_optimization_level=0"}


def cli_environment() -> dict[str, str]:
    """os.environ (the project on its PYTHONPATH: pytest_configure) with TEST_RUN_VARIABLES
    where not set, less PER_TEST_VARIABLES."""
    return {name: value for name, value in {**TEST_RUN_VARIABLES, **os.environ}.items()
            if name not in PER_TEST_VARIABLES}


@contextlib.contextmanager
def as_the_tests_runners():
    """For a test that runs the executor in its own process: os.environ as the runners the
    tests start have it (cli_environment), and the test run's server pool (None where the
    run asked for none). Its children then fork from the pool's templates, as the runners'
    do, instead of importing torch each (spawn: seconds of a core per child)."""
    with pytest.MonkeyPatch.context() as patch:
        for name in PER_TEST_VARIABLES:
            patch.delenv(name, raising=False)
        for name, value in TEST_RUN_VARIABLES.items():
            patch.setenv(name, os.environ.get(name, value))
        pool = os.environ.get(SERVER_POOL_VARIABLE)
        yield None if pool in (None, "", "None") else Path(pool)


def words_printed_by(code: str, env: dict[str, str] | None = None,
                     timeout: float = 300) -> list[str]:
    """Run `code` in a fresh interpreter at the repository's root (for what a process that
    already imported something cannot show): the whitespace-separated words it printed; fails
    the test, with its stderr, if it exited non-zero."""
    done = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


@pytest.fixture
def run_cli(tmp_path, request):
    """Run `experiment_runner.py ARGS` in a child process, output under tmp_path (with
    TEST_RUN_FLAGS unless the test is marked `runner_defaults`)."""
    runner_defaults = request.node.get_closest_marker("runner_defaults") is not None

    def run(*args: str, output_dir: Path | None = None, timeout: float = 600) -> CliRun:
        directory = output_dir or tmp_path / "output"
        completed = subprocess.run(
            cli_command(directory, *args, runner_defaults=runner_defaults),
            capture_output=True, text=True,
            timeout=timeout, env=cli_environment(), cwd=str(tmp_path),
        )
        return CliRun(completed.returncode, completed.stdout, completed.stderr, directory)

    return run


#: The module of torch's that appends a folder of its own to sys.path when it is imported
#: (torch._dynamo imports it): a fresh temporary folder in every process.
def probe_as_runners_key_it():
    """The probe's answer, from the cache the runners the tests start use (for a test that
    needs it in the pytest process, which imported torch._dynamo: the key leaves torch's
    own folder on sys.path out, runner/plan/probe.py)."""
    from runner.plan.probe import probe_host

    return probe_host()


@pytest.fixture
def probed_compiler(monkeypatch):
    """For a test that compiles with inductor in its own process: what the runner's probe
    hands every child for inductor (runner/plan/probe.py: the CPU's vector-ISA checks made
    once for the host), its outcomes answered in this process as a compiling fork server
    answers them (backends/runtimes/inductor_host.py). Without them the first such compile
    of each pytest worker checked the ISAs again (a C++ build and a Python child that
    imports torch, per check: 7 children, 14 CPU-s a suite), which no child of the runner
    does; the same kernels are built either way."""
    from torch._inductor import config

    from backends.runtimes.inductor_host import ISA_CHECKS_VARIABLE, settle_isa_checks

    variables = probe_as_runners_key_it().child_environment
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    checked = variables.get("TORCHINDUCTOR_VEC_ISA_OK") == "1"
    with config.patch({"cpp.vec_isa_ok": True} if checked else {}):
        settle_isa_checks(variables.get(ISA_CHECKS_VARIABLE))
        yield variables


@pytest.fixture
def fast_args() -> list[str]:
    """Flags that keep a real sweep short."""
    return ["--repeat=2", "--warmup=1", "--accelerator=cpu"]
