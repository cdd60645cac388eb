"""XLA's own HLO dump (--dump-hlo), switched on through XLA_FLAGS in the child's environment."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional

from backends.base import XLA_HLO_DUMP
from core.config import RunSettings
from observers.base import Flag, Observer, ObserverContext, RunObserver
from observers.layout import HLO_DIR


def append_xla_flag(current: Optional[str], flag: str) -> str:
    """XLA_FLAGS with one more flag, keeping whatever was there."""
    current = (current or "").strip()
    return f"{current} {flag}" if current else flag


class HloDump(Observer):
    name = "hlo_dump"
    order = 40
    flags = (Flag("--dump-hlo", f"XLA's HLO dump (XLA_FLAGS=--xla_dump_to) in {HLO_DIR}/ (XLA stacks)"),)
    feature = XLA_HLO_DUMP
    elsewhere = "HLO exists only on XLA stacks (--xla=PJRT or --torch-xla2)"
    files = (f"{HLO_DIR}/",)

    def child_environment(self, stack, settings: RunSettings, folder: Path,
                          environment: Mapping[str, str]) -> dict[str, str]:
        target = Path(folder).resolve() / HLO_DIR
        return {"XLA_FLAGS": append_xla_flag(environment.get("XLA_FLAGS"), f"--xla_dump_to={target}")}

    def create(self, context: ObserverContext) -> RunObserver:
        return RunObserver()  # XLA writes the dump itself


OBSERVER = HloDump()
