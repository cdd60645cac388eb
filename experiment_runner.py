"""Entry point: `python experiment_runner.py --help`."""

import sys

from runner.cli import main

if __name__ == "__main__":
    sys.exit(main())
