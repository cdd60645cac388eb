"""A sweep's progress: a bar on a terminal, one log line per experiment elsewhere.

On a terminal, tqdm draws the bar on stderr and the log's records are written above it
(tqdm.contrib.logging), so a warning never lands glued to the bar's line. Where stderr is
not a terminal (a log file, CI, a pipe), carriage-return frames would pile up on one line:
there the sweep logs one line per finished experiment instead, e.g.
`[3/8] mlp cpu inductor eval: ok, 0.505 ms/iter`.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import Any, Mapping, Optional, TextIO

from tqdm import tqdm

from core.figures import median_time

log = logging.getLogger(__name__)


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


def outcome(line: Mapping[str, Any]) -> str:
    """A finished experiment in a few words: 'ok, 0.505 ms/iter', 'failed', 'skipped'."""
    status = str(line.get("status", "?"))
    median = median_time(line) if status == "ok" else None
    if median is None:
        return status
    summary = line.get("summary")
    flagged = isinstance(summary, dict) and summary.get("unreliable")
    return f"{status}, {median * 1e3:.4g} ms/iter" + (" (unreliable)" if flagged else "")


class Progress(contextlib.AbstractContextManager):
    """Counts the experiments of a sweep as they end and shows it (see the module)."""

    def __init__(self, total: int, enabled: bool = True, stream: Optional[TextIO] = None) -> None:
        self.total = total
        self.done = 0
        stream = sys.stderr if stream is None else stream
        terminal = is_terminal(stream)
        self.bar: Optional[tqdm] = None
        if enabled and terminal and total:
            self.bar = tqdm(total=total, unit="exp", file=stream, dynamic_ncols=True)
        self.log_lines = enabled and not terminal
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> "Progress":
        if self.bar is not None:
            # Imported for a bar only: it brings tqdm.auto and asyncio, about 25 ms of the
            # start of every run, most of which show no bar (a log, --no-progress).
            from tqdm.contrib.logging import logging_redirect_tqdm

            self._stack.enter_context(self.bar)
            self._stack.enter_context(logging_redirect_tqdm())
            # Python warnings go through logging, so they too are written above the bar.
            self._stack.callback(logging.captureWarnings, False)
            logging.captureWarnings(True)
        return self

    def __exit__(self, *exc_info) -> None:
        self._stack.close()

    def started(self, text: str) -> None:
        """An experiment started (the bar shows which)."""
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=True)

    def finished(self, text: str = "", line: Optional[Mapping[str, Any]] = None) -> None:
        """An experiment of the plan is done: its line written (`line`), or recorded by
        another runner or skipped without a line of this sweep's (None)."""
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)
        elif self.log_lines and line is not None:
            log.info("[%d/%d] %s: %s", self.done, self.total, text, outcome(line))
