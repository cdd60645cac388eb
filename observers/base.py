"""What an observer plug-in declares (parent side) and the hooks it runs (child side).

An observer module in observers/ exposes one `Observer` as `OBSERVER`: its flags,
the stack feature it needs (backends.base: DYNAMO_GRAPHS, TORCH_PROFILER, ...), the files it
writes, the child environment it needs, and `create`, which builds its `RunObserver` in the
child. The CLI's options and the applicability rules come from these declarations.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from core.config import ExperimentConfig, RunSettings

if TYPE_CHECKING:
    from backends.base import PreparedModel, Stack


class RunHooks:
    """Called by the timing loop outside the timed regions; the defaults do nothing."""

    def before_timed_run(self, index: int) -> None:
        """Timed run `index` (0-based) is about to start."""

    def after_timed_run(self, index: int) -> None:
        """Timed run `index` (0-based) has ended and been measured."""

    def timed_run_output(self, index: int, result: Any) -> None:
        """The result of the last iteration of timed run `index`, after it was measured."""

    def after_timed_runs(self, run_once: Callable[[], Any], device_inputs: list[Any]) -> None:
        """All timed runs have ended; `run_once()` runs one more run like them, untimed."""


@dataclass(frozen=True)
class Flag:
    """One command-line flag: a switch, an option with `choices`, or a value of `value_type`
    (e.g. int; its default is the observer's business, so an unset flag stays unset)."""

    option: str
    help: str
    choices: tuple[str, ...] = ()
    value_type: Optional[Callable[[str], Any]] = None
    metavar: Optional[str] = None

    @property
    def name(self) -> str:
        """The key of its value in RunSettings.observe, e.g. 'dump_hlo'."""
        return self.option.lstrip("-").replace("-", "_")

    @property
    def takes_value(self) -> bool:
        return bool(self.choices) or self.value_type is not None

    def spelled(self, value: Any) -> str:
        """How the user spelled it, e.g. '--dump-hlo' or '--save-ir-format=hlo'."""
        return f"{self.option}={value}" if self.takes_value else self.option


@dataclass(frozen=True)
class ObserverContext:
    """What a child-side observer works with."""

    folder: Path
    experiment: ExperimentConfig
    settings: RunSettings
    stack: "Stack"
    prepared: "PreparedModel"


class RunObserver(RunHooks):
    """An observer's hooks in the child; `metrics` (per-run lists) and `summary` (figures of
    the whole experiment) go into the line's objects of those names."""

    #: Set when the stack could not give what the observer was asked for.
    missing_note: Optional[str] = None

    def metrics(self) -> dict[str, list[Any]]:
        return {}

    def summary(self) -> dict[str, Any]:
        return {}


class Observer(ABC):
    """An observability plug-in."""

    name: str = ""
    #: Position among observers (CLI help, notes).
    order: int = 0
    flags: tuple[Flag, ...] = ()
    #: The stack capability feature it needs.
    feature: str = ""
    #: Why it does not apply where the feature is missing (ends each note).
    elsewhere: str = ""
    #: Files it writes, relative to the child's folder.
    files: tuple[str, ...] = ()
    #: Runs on every stack with the feature, even when no flag asks for it.
    always: bool = False

    def requested(self, settings: RunSettings) -> bool:
        return self.always or any(settings.observing(flag.name) for flag in self.flags)

    def applies(self, stack: "Stack", settings: RunSettings) -> bool:
        return self.feature in stack.capabilities.features

    def inapplicable_notes(self, stack: "Stack", settings: RunSettings) -> list[str]:
        """One note per requested flag, when the observer does not apply to `stack`."""
        if self.applies(stack, settings):
            return []
        return [
            f"{flag.spelled(value)} does not apply to the {stack.name} stack: {self.elsewhere}"
            for flag in self.flags if (value := settings.observing(flag.name))
        ]

    def child_environment(self, stack: "Stack", settings: RunSettings, folder: Path,
                          environment: Mapping[str, str]) -> dict[str, str]:
        """Variables to add to the timing child's `environment` (holding the stack's own)."""
        return {}

    def setup(self, folder: Path, stack: "Stack", settings: RunSettings) -> None:
        """Child side, before the model is prepared."""

    @abstractmethod
    def create(self, context: ObserverContext) -> RunObserver:
        """The child-side hooks (imports torch and the like only here)."""
