"""The stack registry: every module of backends/stacks/ declares one stack as `STACK`.

The parent picks a combination's stack once, at planning (`stack_for`); the child looks it
up by the name recorded in the experiment (`get_stack`). Adding a stack is adding one module
to backends/stacks/ (and its tests).
"""

from __future__ import annotations

from typing import Optional

from backends.base import Stack
from core.config import ExperimentConfig
from core.host.machine import HostCapabilities
from core.plugins import discover

STACKS_PACKAGE = "backends.stacks"


class UnknownStackError(LookupError):
    """A stack name that no module of backends/stacks declares."""


def all_stacks() -> tuple[Stack, ...]:
    """Every registered stack, in name order."""
    stacks = [s for s in discover(STACKS_PACKAGE, "STACK").values() if isinstance(s, Stack)]
    return tuple(sorted(stacks, key=lambda s: s.name))


def user_stacks() -> tuple[Stack, ...]:
    """The registered stacks a user runs, in name order: the project's test-only ones left
    out."""
    return tuple(stack for stack in all_stacks() if not stack.test_only)


def get_stack(name: Optional[str]) -> Stack:
    """The stack called `name`."""
    for stack in all_stacks():
        if stack.name == name:
            return stack
    known = ", ".join(s.name for s in all_stacks())
    raise UnknownStackError(f"no stack is called {name!r}; stacks: {known}")


def stack_for(experiment: ExperimentConfig) -> Optional[Stack]:
    """The stack that owns this combination (the highest priority of those that handle it)."""
    candidates = [s for s in all_stacks() if s.handles(experiment)]
    if not candidates:
        return None
    candidates.sort(key=lambda s: -s.priority)
    if len(candidates) > 1 and candidates[0].priority == candidates[1].priority:
        raise RuntimeError(
            f"stacks {candidates[0].name!r} and {candidates[1].name!r} both claim "
            f"{experiment.describe()} with the same priority"
        )
    return candidates[0]


def no_stack_reason(experiment: ExperimentConfig) -> str:
    return f"no stack runs {experiment.describe()}"


def invalid_reason(experiment: ExperimentConfig, host: HostCapabilities) -> Optional[str]:
    """Why the combination cannot run here, or None when it can."""
    stack = stack_for(experiment)
    if stack is None:
        return no_stack_reason(experiment)
    return stack.mode_reason(experiment) or stack.invalid_reason(experiment, host)
