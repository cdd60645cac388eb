"""runner/run/record/progress.py: a bar on a terminal, with log records above it; plain lines elsewhere."""

import io
import logging
import re
import warnings

import pytest

from runner.run.record.progress import Progress

LINE = {"status": "ok", "metrics": {"per_iter_time": [0.5, 0.002, 0.002, 0.002]},
        "summary": {"cold_start_entries": 1}}


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def logged_to():
    """Route the root logger to a stream, as the CLI's logging.basicConfig does to stderr."""
    handlers = []

    def route(stream):
        handler = logging.StreamHandler(stream)
        handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
        logging.root.addHandler(handler)
        handlers.append(handler)
        return stream

    level = logging.root.level
    logging.root.setLevel(logging.INFO)
    yield route
    logging.root.setLevel(level)
    for handler in handlers:
        logging.root.removeHandler(handler)


def test_on_a_terminal_warnings_are_written_on_lines_of_their_own(logged_to, monkeypatch):
    # As the CLI has it: the log's handler and the bar both on stderr, a terminal.
    stream = Terminal()
    monkeypatch.setattr("sys.stderr", stream)
    logged_to(stream)
    python_warnings = warnings.showwarning
    with Progress(2) as progress:
        progress.started("mlp cpu eager eval")
        logging.getLogger("runner.run.sweep").warning("mlp cpu eager eval failed: boom")
        warnings.warn("a library's warning", UserWarning)
        progress.finished("mlp cpu eager eval", LINE)
    # Between carriage returns and newlines, each message is a whole segment: never after
    # the bar's text on the same line.
    segments = [segment.strip() for segment in re.split(r"[\r\n]", stream.getvalue())]
    assert "WARNING: mlp cpu eager eval failed: boom" in segments
    assert any(segment.startswith("WARNING:") and "a library's warning" in segment
               for segment in segments)
    assert "1/2" in stream.getvalue()  # the bar was drawn
    # After the sweep, warnings are Python's own again and the log writes where it did.
    assert warnings.showwarning is python_warnings
    assert logging.root.handlers[-1].stream is stream


def test_elsewhere_no_carriage_return_and_one_line_per_experiment(logged_to):
    stream = logged_to(io.StringIO())
    with Progress(2, stream=stream) as progress:
        progress.started("mlp cpu eager eval")
        progress.finished("mlp cpu eager eval", LINE)
        progress.finished("mlp cpu inductor eval", None)  # recorded by another runner
        logging.getLogger("runner.run.sweep").warning("a warning")
    text = stream.getvalue()
    assert "\r" not in text
    assert text.splitlines() == ["INFO: [1/2] mlp cpu eager eval: ok, 2 ms/iter",
                                 "WARNING: a warning"]


def test_no_progress_shows_nothing(logged_to):
    stream = logged_to(Terminal())
    with Progress(3, enabled=False, stream=stream) as progress:
        progress.finished("mlp cpu eager eval", LINE)
    assert stream.getvalue() == ""
