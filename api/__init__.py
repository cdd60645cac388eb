"""The product's public interface for code outside it (benchmarks/, tools of one's own).

The runner (the parent), the child process and the stacks keep their modules to themselves;
what a tool may build on is named here, and only here. The import contracts (.importlinter)
hold benchmarks/ to it: a benchmark that imports a module of runner, child, observers,
backends, verifier or models directly breaks them.

Names load when first used (so that `from api import Supervisor` does not import torch):

- running children: `Supervisor`, `ForkServer`
- planning a sweep: `build_parser`, `matrix_request`, `build_plan`, `probe_host`
- what the runner records: `refresh_report_cache`, `processes_of`, `readings_of`
- timing, as a child times: `timed_run`, `warm_up`, `input_seeds`, `MIN_WINDOW_SECONDS`,
  `CorePicker`, `host_pulse`
- what a child compares with PyTorch's harness: `settings_snapshot`, `setting_differences`,
  `our_signature`, `on_meta_or_fake`, `workload_signature`, `IterationSpec`, `fake_mode`,
  `make_fake`, `to_fake`
- a profiler trace's kernel time per iteration: `Tally`, `TraceSummary`, `summarize_trace`
- stacks and suites: `stack_for`, `DYNAMO_STACK`, `apply_numerics`, `HARNESS_OPTIMIZER`,
  `make_optimizer`, `optimizer_settings`, `start_inductor_compile_workers`, `get_suite`
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, for readers and type checkers (and the import graph)
    from backends import stack_for
    from backends.runtimes.precision import apply_numerics
    from backends.runtimes.torch_device import HARNESS as HARNESS_OPTIMIZER
    from backends.runtimes.torch_device import (make_optimizer, optimizer_settings,
                                                start_inductor_compile_workers)
    from backends.stacks.dynamo import STACK as DYNAMO_STACK
    from child.reference import CorePicker, host_pulse
    from child.settings import setting_differences, settings_snapshot
    from child.timing import input_seeds, timed_run, warm_up
    from child.trust import MIN_WINDOW_SECONDS
    from child.workload import IterationSpec, fake_mode, make_fake, on_meta_or_fake, our_signature
    from child.workload import signature as workload_signature
    from child.workload import to_fake
    from models import get_suite
    from observers.trace_sums import Tally, TraceSummary
    from observers.trace_sums import summarize as summarize_trace
    from runner.plan.matrix import build_plan
    from runner.plan.parser import build_parser, matrix_request
    from runner.plan.probe import probe_host
    from runner.run.process.forkserver_client import ForkServer
    from runner.run.process.supervision import Supervisor
    from runner.run.record.report_cache import refresh_report_cache
    from runner.run.record.slow_periods import processes_of, readings_of

#: Each public name: (its module, its name there).
PUBLIC: dict[str, tuple[str, str]] = {
    "Supervisor": ("runner.run.process.supervision", "Supervisor"),
    "ForkServer": ("runner.run.process.forkserver_client", "ForkServer"),
    "build_parser": ("runner.plan.parser", "build_parser"),
    "matrix_request": ("runner.plan.parser", "matrix_request"),
    "build_plan": ("runner.plan.matrix", "build_plan"),
    "probe_host": ("runner.plan.probe", "probe_host"),
    "refresh_report_cache": ("runner.run.record.report_cache", "refresh_report_cache"),
    "processes_of": ("runner.run.record.slow_periods", "processes_of"),
    "readings_of": ("runner.run.record.slow_periods", "readings_of"),
    "Tally": ("observers.trace_sums", "Tally"),
    "TraceSummary": ("observers.trace_sums", "TraceSummary"),
    "summarize_trace": ("observers.trace_sums", "summarize"),
    "timed_run": ("child.timing", "timed_run"),
    "warm_up": ("child.timing", "warm_up"),
    "input_seeds": ("child.timing", "input_seeds"),
    "MIN_WINDOW_SECONDS": ("child.trust", "MIN_WINDOW_SECONDS"),
    "CorePicker": ("child.reference", "CorePicker"),
    "host_pulse": ("child.reference", "host_pulse"),
    "settings_snapshot": ("child.settings", "settings_snapshot"),
    "setting_differences": ("child.settings", "setting_differences"),
    "our_signature": ("child.workload", "our_signature"),
    "on_meta_or_fake": ("child.workload", "on_meta_or_fake"),
    "workload_signature": ("child.workload", "signature"),
    "IterationSpec": ("child.workload", "IterationSpec"),
    "fake_mode": ("child.workload", "fake_mode"),
    "make_fake": ("child.workload", "make_fake"),
    "to_fake": ("child.workload", "to_fake"),
    "stack_for": ("backends", "stack_for"),
    "DYNAMO_STACK": ("backends.stacks.dynamo", "STACK"),
    "apply_numerics": ("backends.runtimes.precision", "apply_numerics"),
    "HARNESS_OPTIMIZER": ("backends.runtimes.torch_device", "HARNESS"),
    "make_optimizer": ("backends.runtimes.torch_device", "make_optimizer"),
    "optimizer_settings": ("backends.runtimes.torch_device", "optimizer_settings"),
    "start_inductor_compile_workers": ("backends.runtimes.torch_device",
                                       "start_inductor_compile_workers"),
    "get_suite": ("models", "get_suite"),
}

__all__ = sorted(PUBLIC)


def __getattr__(name: str) -> Any:
    """Load a public name from its module when it is first asked for."""
    try:
        module, attribute = PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'api' has no public name {name!r}") from None
    return getattr(importlib.import_module(module), attribute)


def __dir__() -> list[str]:
    return __all__
