"""Entry point: `python experiment_runner.py --help`."""

import sys

if __name__ == "__main__":
    try:
        # SIGTERM stops the runner like Ctrl-C from the very start (runner/signals.py).
        from runner import signals

        signals.install()
        from runner.cli import main
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM while the runner is still starting
        sys.exit(128 + getattr(stop, "signum", 2))
    sys.exit(main())
