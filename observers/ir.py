"""The IR of the experiment's graphs (--save-ir-format): written by torch_xla from its
environment, or lowered by the stack's runtime itself (torchax)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from backends.base import LOWERED_IR, TORCH_XLA_IR_FILES
from core.config import RunSettings
from observers.base import Flag, Observer, ObserverContext, RunObserver
from observers.layout import IR_DIR, ir_file_stem

IR_FORMATS = ("text", "hlo", "stablehlo")
FLAG = Flag("--save-ir-format", f"save the IR of the experiment's graphs in {IR_DIR}/ (XLA stacks)",
            choices=IR_FORMATS)


class GraphIrObserver(RunObserver):
    """Writes ir/graphs.<format>.txt from the stack's own lowering of one step."""

    def __init__(self, folder: Path, ir_format: str,
                 lower: Callable[[str, Any], Optional[str]]) -> None:
        self.path = Path(folder) / IR_DIR / ir_file_stem(ir_format)
        self.ir_format = ir_format
        self.lower = lower

    def after_timed_runs(self, run_once: Callable[[], Any], device_inputs: list[Any]) -> None:
        text = self.lower(self.ir_format, device_inputs[0])
        if text is None:
            self.missing_note = (f"--save-ir-format={self.ir_format}: the stack could not "
                                 "lower its step to that format")
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(text, encoding="utf-8")


class GraphIr(Observer):
    name = "ir"
    order = 50
    flags = (FLAG,)
    files = (f"{IR_DIR}/{ir_file_stem('<format>')}",)

    def applies(self, stack, settings: RunSettings) -> bool:
        return settings.observing(FLAG.name) in stack.capabilities.ir_formats

    def inapplicable_notes(self, stack, settings: RunSettings) -> list[str]:
        ir_format = settings.observing(FLAG.name)
        if self.applies(stack, settings):
            return []
        formats = stack.capabilities.ir_formats
        why = (f"it saves {' and '.join(formats)}" if formats else
               "IR is saved only for XLA stacks (--xla=PJRT or --torch-xla2)")
        return [f"{FLAG.spelled(ir_format)} does not apply to the {stack.name} stack: {why}"]

    def child_environment(self, stack, settings: RunSettings, folder: Path,
                          environment: Mapping[str, str]) -> dict[str, str]:
        if TORCH_XLA_IR_FILES not in stack.capabilities.features:
            return {}
        ir_format = settings.observing(FLAG.name)
        # torch_xla writes every graph it syncs to this file (name + '.<device ordinal>').
        return {"XLA_SAVE_TENSORS_FILE": str(Path(folder).resolve() / IR_DIR / ir_file_stem(ir_format)),
                "XLA_SAVE_TENSORS_FMT": ir_format}

    def setup(self, folder: Path, stack, settings: RunSettings) -> None:
        # torch_xla opens XLA_SAVE_TENSORS_FILE in this folder at its first sync.
        (Path(folder) / IR_DIR).mkdir(parents=True, exist_ok=True)

    def create(self, context: ObserverContext) -> RunObserver:
        if LOWERED_IR not in context.stack.capabilities.features:
            return RunObserver()  # torch_xla writes the files itself
        return GraphIrObserver(context.folder, context.settings.observing(FLAG.name),
                               context.prepared.graph_ir)


OBSERVER = GraphIr()
