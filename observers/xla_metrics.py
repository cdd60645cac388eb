"""torch_xla's metrics report, written per timed run (PyTorch/XLA stacks)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from backends.base import TORCH_XLA_METRICS
from observers.base import Flag, Observer, ObserverContext, RunObserver
from observers.layout import RUN_DIR_PREFIX, XLA_METRICS_FILE, run_dir


class XlaMetricsObserver(RunObserver):
    """Writes run-<i>/xla_metrics.txt after each timed run (metrics of that run)."""

    def __init__(self, folder: Path, report: Callable[[], Optional[str]]) -> None:
        self.folder = folder
        self.report = report

    def after_timed_run(self, index: int) -> None:
        text = self.report()
        if text is None:
            self.missing_note = "--dump-pytorch-xla-metrics: the stack gave no metrics report"
            return
        (run_dir(self.folder, index) / XLA_METRICS_FILE).write_text(text, encoding="utf-8")


class XlaMetrics(Observer):
    name = "xla_metrics"
    order = 30
    flags = (Flag("--dump-pytorch-xla-metrics",
                  "torch_xla's metrics report per timed run (PyTorch/XLA stacks)"),)
    feature = TORCH_XLA_METRICS
    elsewhere = "torch_xla's metrics exist only on PyTorch/XLA stacks (--xla=PJRT)"
    files = (f"{RUN_DIR_PREFIX}<i>/{XLA_METRICS_FILE}",)

    def create(self, context: ObserverContext) -> RunObserver:
        return XlaMetricsObserver(context.folder, context.prepared.xla_metrics_report)


OBSERVER = XlaMetrics()
