"""The `experiment-runner` command: a report starts without the sweep's modules.

`experiment-runner report|compare|score ...` hands over to reports/cli.py at once; anything
else is a sweep (runner/app.py), whose modules (the plan, the executor, the stacks) are
imported only then: a report is spared their import, about a tenth of a second.
"""

from __future__ import annotations

import sys
from typing import Optional, Sequence

from runner.report_commands import REPORT_COMMANDS, run_report_command


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line: a report command, else a sweep (runner.app.main)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in REPORT_COMMANDS:
        return run_report_command(argv)
    from runner.app import main as sweep_main

    return sweep_main(argv)
