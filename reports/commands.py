"""`experiment-runner report|compare|score ...`: handed over to reports/cli.py."""

from __future__ import annotations

import sys
from typing import Sequence

REPORT_COMMANDS = ("report", "compare", "score")
EXIT_BAD_INPUT = 2


def run_report_command(argv: Sequence[str]) -> int:
    """`experiment-runner report|compare|score ...`; returns the exit code."""
    try:
        from reports import cli as reports_cli
    except ImportError:
        print(f"experiment-runner {argv[0]}: reports are not available in this version",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    return reports_cli.main(list(argv))
