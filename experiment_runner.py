"""Entry point: `python experiment_runner.py --help`."""

import sys

if __name__ == "__main__":
    try:
        from runner.cli import main
    except KeyboardInterrupt:  # Ctrl-C while the runner is still starting
        sys.exit(130)
    sys.exit(main())
