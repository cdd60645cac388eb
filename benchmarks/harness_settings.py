"""Run one of PyTorch's harness scripts and record the settings in force at its first timed call.

    python -m benchmarks.harness_settings OUT.json [--stop] HARNESS_DIR/timm_models.py --performance ...

The harness's code runs unchanged, as its users run it: this launcher imports the harness's
own `common` from its folder, wraps `common.timed` (the function every eager and compiled timed
run of the harness goes through; its scripts' experiments look it up at each call), then runs
the script as `__main__` with runpy. At the first timed call it writes to OUT.json the
snapshot our runner records in every line (child/settings.py, the same function): the
grad mode the harness set for the test and the autocast of its iteration
(`runner.autocast(**runner.autocast_arg)`, which its forward_pass and
forward_and_backward_pass enter) are read inside that context, and no compile options are
added (the harness sets inductor's settings globally). --stop ends the process right after
(with exit status 0): the settings are all it was run for.

Where the installed torch lacks two helpers the harness imports (torch before 2.11) they are
provided, and torch_xla, where installed, is hidden from it, as on the card
(benchmarks/workload_parity.py says why); on the GPU image neither changes anything.
"""

from __future__ import annotations

import functools
import json
import os
import runpy
import sys
from pathlib import Path
from typing import Any, Callable, Optional

ROOT = Path(__file__).resolve().parents[1]


def iteration_context(model_iter_fn: Any) -> Optional[Callable[[], Any]]:
    """The autocast context the harness's iteration enters: its runner's, found through the
    iteration function (a bound method of the runner; a compiled one wraps it)."""
    function = model_iter_fn
    for _ in range(4):
        runner = getattr(function, "__self__", None)
        if runner is not None and hasattr(runner, "autocast"):
            return lambda: runner.autocast(**getattr(runner, "autocast_arg", {}))
        function = getattr(function, "__wrapped__", None) or getattr(function, "_torchdynamo_orig_callable", None)
        if function is None:
            return None
    return None


def device_of(argv: list[str]) -> str:
    """The harness's --device (its default, cuda, where not given)."""
    for index, argument in enumerate(argv):
        if argument.startswith("--device="):
            return argument.split("=", 1)[1]
        if argument in ("--device", "--devices", "-d") and index + 1 < len(argv):
            return argv[index + 1]
    return "cuda"


def record_at_first_timed_call(common: Any, out: Path, device: str, stop: bool,
                               snapshot: Callable[..., dict[str, Any]]) -> None:
    """Wrap `common.timed`: its first call writes the snapshot to `out` (and, with `stop`,
    ends the process) before it times."""
    timed = common.timed
    taken: list[bool] = []

    @functools.wraps(timed)
    def timed_with_settings(model, model_iter_fn, *args, **kwargs):
        if not taken:
            taken.append(True)
            context = iteration_context(model_iter_fn)
            settings = snapshot(device, iteration_context=context)
            record = {"settings": settings, "iteration_context": context is not None}
            out.write_text(json.dumps(record, indent=1, sort_keys=True))
            if stop:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(0)
        return timed(model, model_iter_fn, *args, **kwargs)

    common.timed = timed_with_settings


def load_snapshot() -> Callable[..., dict[str, Any]]:
    """Our snapshot function, imported without leaving the project on the harness's import
    path (its folder has modules of its own)."""
    sys.path.insert(0, str(ROOT))
    try:
        from api import settings_snapshot
    finally:
        sys.path.remove(str(ROOT))
    return settings_snapshot


def run_harness(script: Path, arguments: list[str], install: Callable[[Any], None]) -> None:
    """Run the harness's `script` as `__main__` with `arguments`, after `install(common)` on
    its own `common` module; with the two helpers torch before 2.11 lacks provided and
    torch_xla hidden, as on the card (no change where torch has them and torch_xla is
    absent)."""
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.workload_parity import provide_names_older_torch_lacks
    finally:
        sys.path.remove(str(ROOT))
    provide_names_older_torch_lacks()
    if "torch_xla" not in sys.modules:
        sys.modules["torch_xla"] = None  # type: ignore[assignment]  # as on the card
    sys.path.insert(0, str(script.parent))
    os.chdir(script.parent)
    import common  # the harness's own, from its folder; its scripts import this same module

    install(common)
    sys.argv = [str(script), *arguments]
    runpy.run_path(str(script), run_name="__main__")


def launcher_arguments(argv: list[str], usage: str) -> Optional[tuple[Path, bool, Path, list[str]]]:
    """(OUT, --stop given, the harness script, its arguments), or None (printed) when they
    are not that."""
    stop = "--stop" in argv[1:2]
    rest = argv[2:] if stop else argv[1:]
    if len(argv) < 2 or not rest or not rest[0].endswith(".py"):
        print(f"usage: {usage}", file=sys.stderr)
        return None
    script = Path(rest[0]).resolve()
    if not script.is_file():
        print(f"no harness script at {rest[0]}", file=sys.stderr)
        return None
    return Path(argv[0]).absolute(), stop, script, rest[1:]


def main(argv: list[str]) -> int:
    parsed = launcher_arguments(
        argv, "harness_settings.py OUT.json [--stop] HARNESS_SCRIPT.py [its arguments]")
    if parsed is None:
        return 2
    out, stop, script, arguments = parsed
    snapshot = load_snapshot()
    run_harness(script, arguments, lambda common: record_at_first_timed_call(
        common, out, device_of(arguments), stop, snapshot))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
