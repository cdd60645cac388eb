"""The model's output of each timed run, saved with torch.save (--save-output).

As PyTorch/XLA's runner saves each repeat's output: `run-<i>/output.pt` of the timing
child's folder, written after the run was measured. In eval it is the prediction; in train
the loss, or with --collect-full-output the loss and the gradients (PyTorch/XLA's runner then
returns the full output from its training step, which changes what it times; here the
timed step is the same either way, and only what is saved differs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from core.config import RunSettings
from observers.base import Flag, Observer, ObserverContext, RunObserver
from observers.layout import OUTPUT_FILE, RUN_DIR_PREFIX, run_dir

SAVE = Flag("--save-output",
            f"save each timed run's output as {RUN_DIR_PREFIX}N/{OUTPUT_FILE} (torch.save, on "
            "the CPU): the prediction in eval, the loss in train")
FULL = Flag("--collect-full-output",
            "with --save-output, train saves the loss and the gradients, not the loss only")


class OutputObserver(RunObserver):
    def __init__(self, folder: Path, to_host: Callable[[Any], Any], training: bool,
                 full: bool) -> None:
        self.folder = Path(folder)
        self.to_host = to_host
        self.training = training
        self.full = full

    def timed_run_output(self, index: int, result: Any) -> None:
        import torch

        output = self.to_host(result)
        if self.training and not self.full and isinstance(output, dict) and "loss" in output:
            output = output["loss"]
        torch.save(output, run_dir(self.folder, index) / OUTPUT_FILE)


class Output(Observer):
    name = "output"
    order = 60
    flags = (SAVE, FULL)
    files = (f"{RUN_DIR_PREFIX}<i>/{OUTPUT_FILE}",)

    def requested(self, settings: RunSettings) -> bool:
        return bool(settings.observing(SAVE.name))

    def applies(self, stack, settings: RunSettings) -> bool:
        return True  # every stack hands its result to the host

    def create(self, context: ObserverContext) -> RunObserver:
        return OutputObserver(context.folder, context.prepared.result_to_host,
                              context.experiment.test == "train",
                              bool(context.settings.observing(FULL.name)))


OBSERVER = Output()
