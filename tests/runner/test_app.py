"""runner/app.py's main: a stop that lands while the command line is still being read."""

import pytest

from runner import app
from runner.run import signals


@pytest.mark.parametrize("stop, status", [(KeyboardInterrupt(), 130),
                                          (signals.Terminated(15), 143)])
def test_a_stop_while_parsing_exits_with_the_signals_status(monkeypatch, capsys, stop, status):
    """Parsing imports lazily, so Ctrl-C or SIGTERM can land there: the runner says so and
    exits 128 + the signal, as at any later moment, with no traceback."""
    def interrupted_parser():
        raise stop

    monkeypatch.setattr(app.signals, "install", lambda: None)
    monkeypatch.setattr(app, "build_parser", interrupted_parser)
    assert app.main(["--accelerator=cpu"]) == status
    stderr = capsys.readouterr().err
    assert "experiment-runner: " in stderr and signals.signal_name(stop) in stderr
    assert "Traceback" not in stderr
