"""The `experiment-runner` command (and `python experiment_runner.py --help`).

`report`, `compare` and `score` hand over to the reports (reports/commands.py) without
importing the sweep's modules, `bisect` to the bisection (bisection/cli.py); anything else
is a sweep (runner/app.py). Run as a script, the
runner's own requirements are checked before anything of it is imported, so that a Python
without them (the system's, before `make setup`) says how to set up in one line.
"""

# Only sys (loaded with the interpreter) before the script's try block: a Ctrl-C while a
# module is imported here would end the runner with a traceback instead of its exit status;
# the others are imported where they are used.
import sys

BISECT_COMMAND = "bisect"
REQUIRED_MODULES = ("psutil", "jsonlines", "tqdm", "filelock")
EXIT_NOT_SET_UP = 2
EXIT_BAD_INPUT = 2


def missing_modules() -> list:
    import importlib.util

    return [name for name in REQUIRED_MODULES if importlib.util.find_spec(name) is None]


def hold_stop_signals() -> None:
    """Hold SIGINT, SIGTERM and SIGHUP from here to the exit, where they are dropped.

    Once the run is over and its status decided, a stop signal has nothing left to stop; let
    through, it would kill the interpreter while it shuts down (its handlers are gone by
    then), and the runner would end by the signal instead of with its status."""
    import signal

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


def redeliver_stop(unraisable) -> None:
    """`sys.unraisablehook`: a stop signal that lands in code whose exceptions Python
    ignores (a weakref callback, such as the import system's cleanup of a module lock while
    the runner imports its modules) would be printed as "Exception ignored" and lost, and
    the sweep would run on. It is sent again to the main thread a moment later, from
    another thread (sent from here, it would land in this hook and be lost too), to land in
    the runner's own code; any other unraisable exception is reported as Python reports it."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        import signal
        import threading

        number = getattr(unraisable.exc_value, "signum", signal.SIGINT)
        threading.Timer(0.01, signal.pthread_kill,
                        (threading.main_thread().ident, number)).start()
        return
    sys.__unraisablehook__(unraisable)


def mistyped_command(argv) -> "str | None":
    """The command a first argument that is no flag is a slip of (`reprot`, `bisct`), if any."""
    from reports.commands import REPORT_COMMANDS

    if not argv or argv[0].startswith("-"):
        return None
    import difflib

    found = difflib.get_close_matches(argv[0], (*REPORT_COMMANDS, BISECT_COMMAND), n=1,
                                      cutoff=0.6)
    return found[0] if found else None


def main(argv=None) -> int:
    """The command line (`argv`, sys.argv[1:] when None): a report command, else a sweep
    (runner.app.main). Stop signals that Python would ignore are sent again meanwhile
    (`redeliver_stop`; the installed command starts here)."""
    previous, sys.unraisablehook = sys.unraisablehook, redeliver_stop
    try:
        return run_command(list(sys.argv[1:] if argv is None else argv))
    finally:
        sys.unraisablehook = previous


def run_command(argv: list) -> int:
    """A report command, the bisection, or a sweep, by the first argument."""
    from reports.commands import REPORT_COMMANDS, run_report_command

    if argv and argv[0] in REPORT_COMMANDS:
        return run_report_command(argv)
    if argv and argv[0] == BISECT_COMMAND:
        from bisection.cli import main as bisect_main

        return bisect_main(argv[1:])
    slip = mistyped_command(argv)
    if slip:
        print(f"experiment-runner: error: unknown command {argv[0]!r}: did you mean {slip!r}? "
              f"(the commands: {', '.join((*REPORT_COMMANDS, BISECT_COMMAND))}; a sweep takes "
              "flags only)",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    from runner.app import main as sweep_main

    return sweep_main(argv)


if __name__ == "__main__":
    sys.unraisablehook = redeliver_stop
    try:
        missing = missing_modules()
        if missing:
            print(f"experiment_runner.py: {', '.join(missing)} missing from {sys.executable}; "
                  "set up first: make setup (or use .venv/bin/python)", file=sys.stderr)
            sys.exit(EXIT_NOT_SET_UP)
        # SIGTERM stops the runner like Ctrl-C from the very start (runner/run/process/signals.py).
        from runner.run.process import signals

        signals.install()
        status = main()
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM while the runner starts or returns
        status = 128 + getattr(stop, "signum", 2)
    finally:
        hold_stop_signals()
    sys.exit(status)
