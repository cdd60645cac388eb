"""All observers of one timing child behind the timing loop's hooks (child side).

An observer that fails leaves a note on the line instead of failing the experiment: the
timings it did not touch are still worth having.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable

from backends.base import PreparedModel, Stack
from core.config import ExperimentConfig, RunSettings
from observers import all_observers, inapplicable_notes
from observers.base import ObserverContext, RunHooks, RunObserver

log = logging.getLogger(__name__)


class ExperimentObservers(RunHooks):
    """Builds the observers the settings ask for and that apply to the experiment's stack."""

    def __init__(self, stack: Stack, experiment: ExperimentConfig, settings: RunSettings,
                 folder: Path) -> None:
        self.stack = stack
        self.experiment = experiment
        self.settings = settings
        self.folder = Path(folder)
        self.notes: list[str] = inapplicable_notes(stack, settings)
        self._plugins = [o for o in all_observers()
                         if o.requested(settings) and o.applies(stack, settings)]
        self._active: list[tuple[str, RunObserver]] = []
        for plugin in self._plugins:
            plugin.setup(self.folder, stack, settings)

    def attach(self, prepared: PreparedModel) -> None:
        """Create the observers' hooks for a prepared model (call before timing)."""
        context = ObserverContext(self.folder, self.experiment, self.settings, self.stack, prepared)
        self._active = [(plugin.name, plugin.create(context)) for plugin in self._plugins]

    def _each(self, call: Callable[[RunObserver], None], hook: str) -> None:
        for name, observer in list(self._active):
            try:
                call(observer)
            except Exception as error:
                log.exception("observer %s failed in %s", name, hook)
                self.notes.append(
                    f"observer {name} failed and was stopped: {type(error).__name__}: {error}")
                self._active.remove((name, observer))

    def before_timed_run(self, index: int) -> None:
        self._each(lambda o: o.before_timed_run(index), "before_timed_run")

    def after_timed_run(self, index: int) -> None:
        self._each(lambda o: o.after_timed_run(index), "after_timed_run")

    def after_timed_runs(self, run_once: Callable[[], Any], device_inputs: list[Any]) -> None:
        self._each(lambda o: o.after_timed_runs(run_once, device_inputs), "after_timed_runs")

    def timed_run_output(self, index: int, result: Any) -> None:
        self._each(lambda o: o.timed_run_output(index, result), "timed_run_output")

    def metrics(self) -> dict[str, Any]:
        """Per-run metrics of every observer, and notes for files a stack could not give."""
        collected: dict[str, Any] = {}
        self._each(lambda o: collected.update(o.metrics()), "metrics")
        self.notes.extend(o.missing_note for _, o in self._active if o.missing_note)
        return collected

    def summary(self) -> dict[str, Any]:
        """Figures of the whole experiment from every observer (call after `metrics`)."""
        collected: dict[str, Any] = {}
        self._each(lambda o: collected.update(o.summary()), "summary")
        return collected
