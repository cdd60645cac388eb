"""XLA dumps written by the child: torch_xla's metrics report per timed run, and the IR of
stacks that lower their step themselves (torchax).

HLO dumps (--dump-hlo) and torch_xla's IR files are written by XLA and torch_xla from the
environment the parent sets (runner/observers/rules.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

from runner.observers.layout import IR_DIR, XLA_METRICS_FILE, ir_file_stem, run_dir


class XlaMetricsObserver:
    """Writes run-<i>/xla_metrics.txt after each timed run (metrics of that run)."""

    def __init__(self, experiment_dir: Path, report: Callable[[], Optional[str]]) -> None:
        self.experiment_dir = experiment_dir
        self.report = report
        self.missing_note: Optional[str] = None

    def after_timed_run(self, index: int) -> None:
        text = self.report()
        if text is None:
            self.missing_note = "--dump-pytorch-xla-metrics: the stack gave no metrics report"
            return
        (run_dir(self.experiment_dir, index) / XLA_METRICS_FILE).write_text(
            text, encoding="utf-8")


class GraphIrObserver:
    """Writes ir/graphs.<format>.txt from the stack's own lowering of one step."""

    def __init__(
        self, experiment_dir: Path, ir_format: str, lower: Callable[[str, Any], Optional[str]]
    ) -> None:
        self.path = Path(experiment_dir) / IR_DIR / ir_file_stem(ir_format)
        self.ir_format = ir_format
        self.lower = lower
        self.missing_note: Optional[str] = None

    def after_timed_runs(self, run_once: Callable[[], Any], device_inputs: list[Any]) -> None:
        text = self.lower(self.ir_format, device_inputs[0])
        if text is None:
            self.missing_note = (f"--save-ir-format={self.ir_format}: the stack could not "
                                 "lower its step to that format")
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(text, encoding="utf-8")
