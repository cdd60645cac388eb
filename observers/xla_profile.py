"""XLA's profiler (--profile-xla): an XPlane trace for TensorBoard, from profiled runs.

PyTorch/XLA's runner captures its trace while the timed runs run (and warns not to
benchmark with it). Here, as for the PyTorch profiler, the profiled runs are runs of their
own after the timed runs: they repeat until --profile-xla-duration-ms has passed (at least
one run), so profiling never reaches `total_time`. The trace is written under
`xla-profile/` of the timing child's folder (plugins/profile/<time>/<host>.xplane.pb).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from backends.base import XLA_PROFILER
from core.config import RunSettings
from observers.base import Flag, Observer, ObserverContext, RunObserver
from observers.layout import XLA_PROFILE_DIR

DEFAULT_DURATION_MS = 5000


def positive_milliseconds(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


PROFILE = Flag("--profile-xla",
               f"XLA's profiler trace (XPlane, for TensorBoard) in {XLA_PROFILE_DIR}/, from "
               "profiled runs after the timed runs (PyTorch/XLA and torchax stacks)")
DURATION = Flag("--profile-xla-duration-ms",
                "how long --profile-xla keeps running profiled runs, in milliseconds "
                f"(at least one run; default {DEFAULT_DURATION_MS})",
                value_type=positive_milliseconds, metavar="MS")


class XlaProfileObserver(RunObserver):
    def __init__(self, folder: Path, duration_s: float, trace: Callable[[str], Any]) -> None:
        self.log_dir = Path(folder) / XLA_PROFILE_DIR
        self.duration_s = duration_s
        self.trace = trace
        self.runs = 0

    def after_timed_runs(self, run_once: Callable[[], Any], device_inputs: list[Any]) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with self.trace(str(self.log_dir)):
            deadline = time.monotonic() + self.duration_s
            while True:
                run_once()
                self.runs += 1
                if time.monotonic() >= deadline:
                    break

    def summary(self) -> dict[str, Any]:
        return {"xla_profile_runs": self.runs} if self.runs else {}


class XlaProfile(Observer):
    name = "xla_profile"
    order = 25
    flags = (PROFILE, DURATION)
    feature = XLA_PROFILER
    elsewhere = "XLA's profiler traces only XLA stacks (--xla=PJRT or --torch-xla2)"
    files = (f"{XLA_PROFILE_DIR}/",)

    def requested(self, settings: RunSettings) -> bool:
        return bool(settings.observing(PROFILE.name))

    def inapplicable_notes(self, stack, settings: RunSettings) -> list[str]:
        if self.applies(stack, settings):
            return []
        return [f"{PROFILE.option} does not apply to the {stack.name} stack: {self.elsewhere}"]

    def create(self, context: ObserverContext) -> RunObserver:
        duration_ms = context.settings.observing(DURATION.name) or DEFAULT_DURATION_MS
        return XlaProfileObserver(context.folder, duration_ms / 1e3, context.prepared.xla_trace)


OBSERVER = XlaProfile()
