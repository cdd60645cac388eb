"""All observers of one experiment behind the timing loop's hooks (child side).

An observer that fails leaves a note on the line instead of failing the experiment: the
timings it did not touch are still worth having.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable

from backends.base import PreparedModel
from runner.config import ExperimentConfig, RunSettings
from runner.observers.layout import IR_DIR
from runner.observers.rules import (
    DYNAMO_FAMILIES,
    IR_FORMATS_BY_FAMILY,
    PROFILED_FAMILIES,
    TORCH_XLA_FAMILIES,
    TORCHAX,
    inapplicable_notes,
    stack_family,
)
from runner.timing import RunHooks

log = logging.getLogger(__name__)


class ExperimentObservers(RunHooks):
    """Builds the observers the settings ask for and that apply to the experiment's stack."""

    def __init__(
        self, experiment: ExperimentConfig, settings: RunSettings, experiment_dir: Path
    ) -> None:
        self.experiment = experiment
        self.settings = settings
        self.experiment_dir = Path(experiment_dir)
        self.family = stack_family(experiment)
        self.notes: list[str] = inapplicable_notes(experiment, settings)
        self._observers: list[Any] = []
        if settings.save_ir_format and self.family in TORCH_XLA_FAMILIES:
            # torch_xla opens XLA_SAVE_TENSORS_FILE in this folder at its first sync.
            (self.experiment_dir / IR_DIR).mkdir(parents=True, exist_ok=True)

    def attach(self, prepared: PreparedModel) -> None:
        """Create the observers for a prepared model (call before timing)."""
        from runner.observers.dynamo_counters import DynamoCountersObserver
        from runner.observers.profiler import ProfilerObserver
        from runner.observers.xla_dumps import GraphIrObserver, XlaMetricsObserver

        settings, family, directory = self.settings, self.family, self.experiment_dir
        if family in DYNAMO_FAMILIES:
            self._observers.append(DynamoCountersObserver(
                directory, settings.collect_dynamo_counters, settings.dump_dynamo_counters))
        if settings.profiled_runs and family in PROFILED_FAMILIES:
            self._observers.append(ProfilerObserver(
                directory, settings.repeat, settings.iterations_per_run,
                self.experiment.accelerator, prepared.fallback_operators,
                totals=settings.profile_cuda_cpu,
                individual_ops=settings.profile_individual_ops,
                dump=settings.dump_pytorch_profiles,
            ))
        if settings.dump_pytorch_xla_metrics and family in TORCH_XLA_FAMILIES:
            self._observers.append(XlaMetricsObserver(directory, prepared.xla_metrics_report))
        ir_format = settings.save_ir_format
        if ir_format and family == TORCHAX and ir_format in IR_FORMATS_BY_FAMILY[TORCHAX]:
            self._observers.append(GraphIrObserver(directory, ir_format, prepared.graph_ir))

    def _each(self, method: str, call: Callable[[Any], None]) -> None:
        for observer in list(self._observers):
            if not hasattr(observer, method):
                continue
            try:
                call(getattr(observer, method))
            except Exception as error:
                name = type(observer).__name__
                log.exception("%s failed in %s", name, method)
                self.notes.append(f"{name} failed and was stopped: {type(error).__name__}: {error}")
                self._observers.remove(observer)

    def before_timed_run(self, index: int) -> None:
        self._each("before_timed_run", lambda method: method(index))

    def after_timed_run(self, index: int) -> None:
        self._each("after_timed_run", lambda method: method(index))

    def after_timed_runs(self, run_once: Callable[[], Any], device_inputs: list[Any]) -> None:
        self._each("after_timed_runs", lambda method: method(run_once, device_inputs))

    def metrics(self) -> dict[str, Any]:
        """Metrics of every observer, and notes for files a stack could not give."""
        collected: dict[str, Any] = {}
        self._each("metrics", lambda method: collected.update(method()))
        for observer in self._observers:
            note = getattr(observer, "missing_note", None)
            if note:
                self.notes.append(note)
        return collected
