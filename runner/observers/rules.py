"""Which observability flag applies to which stack, and the child environment they need.

Parent-safe (no torch): the parent builds the child's environment from these rules, and the
child turns a flag that does not apply into one note on the line instead of a failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from runner.config import ExperimentConfig, RunSettings
from runner.observers.layout import HLO_DIR, IR_DIR, ir_file_stem

EAGER = "eager"
DYNAMO = "dynamo"
XLA_LAZY = "xla_lazy"
OPENXLA = "openxla"
TORCHAX = "torchax"

TORCH_XLA_FAMILIES = frozenset({XLA_LAZY, OPENXLA})
XLA_FAMILIES = frozenset({XLA_LAZY, OPENXLA, TORCHAX})
DYNAMO_FAMILIES = frozenset({DYNAMO, OPENXLA})
PROFILED_FAMILIES = frozenset({EAGER, DYNAMO, XLA_LAZY, OPENXLA})


def stack_family(experiment: ExperimentConfig) -> str:
    """eager, dynamo, xla_lazy, openxla or torchax (debug stacks count as their base)."""
    if experiment.torch_xla2 is not None:
        return TORCHAX
    if experiment.xla is not None:
        return OPENXLA if experiment.dynamo is not None else XLA_LAZY
    return DYNAMO if experiment.dynamo is not None else EAGER


@dataclass(frozen=True)
class FlagRule:
    """A flag, the stacks it applies to, and what to tell users elsewhere."""

    flag: str
    setting: str
    families: frozenset[str]
    elsewhere: str


NO_DYNAMO = "dynamo counters exist only where dynamo compiles (--dynamo=...)"
NOT_PROFILED = "torchax runs jitted JAX functions, whose work the PyTorch profiler does not see"

FLAG_RULES = (
    FlagRule("--collect-dynamo-counters", "collect_dynamo_counters", DYNAMO_FAMILIES, NO_DYNAMO),
    FlagRule("--dump-dynamo-counters", "dump_dynamo_counters", DYNAMO_FAMILIES, NO_DYNAMO),
    FlagRule("--profile-cuda-cpu", "profile_cuda_cpu", PROFILED_FAMILIES, NOT_PROFILED),
    FlagRule("--profile-cuda-cpu-individual-ops", "profile_individual_ops", PROFILED_FAMILIES, NOT_PROFILED),
    FlagRule("--dump-pytorch-profiles", "dump_pytorch_profiles", PROFILED_FAMILIES, NOT_PROFILED),
    FlagRule("--dump-pytorch-xla-metrics", "dump_pytorch_xla_metrics", TORCH_XLA_FAMILIES,
             "torch_xla's metrics exist only on PyTorch/XLA stacks (--xla=PJRT)"),
    FlagRule("--dump-hlo", "dump_hlo", XLA_FAMILIES,
             "HLO exists only on XLA stacks (--xla=PJRT or --torch-xla2)"),
)

#: The IR formats each family can save.
IR_FORMATS_BY_FAMILY = {
    XLA_LAZY: ("text", "hlo", "stablehlo"),
    OPENXLA: ("text", "hlo", "stablehlo"),
    TORCHAX: ("hlo", "stablehlo"),
}


def _ir_note(family: str, ir_format: str) -> str:
    if family == TORCHAX:
        return (f"--save-ir-format={ir_format} does not apply to torchax: it has no lazy "
                "tensor IR; hlo and stablehlo do")
    return (f"--save-ir-format={ir_format} does not apply to the {family} stack: IR is saved "
            "only for XLA stacks (--xla=PJRT or --torch-xla2)")


def inapplicable_notes(experiment: ExperimentConfig, settings: RunSettings) -> list[str]:
    """One note per requested flag that does not apply to this experiment's stack."""
    family = stack_family(experiment)
    notes = [
        f"{rule.flag} does not apply to the {family} stack: {rule.elsewhere}"
        for rule in FLAG_RULES
        if getattr(settings, rule.setting) and family not in rule.families
    ]
    ir_format = settings.save_ir_format
    if ir_format and ir_format not in IR_FORMATS_BY_FAMILY.get(family, ()):
        notes.append(_ir_note(family, ir_format))
    return notes


def append_xla_flag(current: str | None, flag: str) -> str:
    """XLA_FLAGS with one more flag, keeping whatever was there."""
    current = (current or "").strip()
    return f"{current} {flag}" if current else flag


def observability_environment(
    experiment: ExperimentConfig,
    settings: RunSettings,
    experiment_dir: Path,
    environment: Mapping[str, str],
) -> dict[str, str]:
    """Variables to add to the child's `environment` (already holding the stack's own)."""
    family = stack_family(experiment)
    directory = Path(experiment_dir).resolve()
    added: dict[str, str] = {}
    if settings.dump_hlo and family in XLA_FAMILIES:
        added["XLA_FLAGS"] = append_xla_flag(
            environment.get("XLA_FLAGS"), f"--xla_dump_to={directory / HLO_DIR}"
        )
    ir_format = settings.save_ir_format
    if ir_format and family in TORCH_XLA_FAMILIES:
        # torch_xla writes every graph it syncs to this file (name + '.<device ordinal>').
        added["XLA_SAVE_TENSORS_FILE"] = str(directory / IR_DIR / ir_file_stem(ir_format))
        added["XLA_SAVE_TENSORS_FMT"] = ir_format
    return added
