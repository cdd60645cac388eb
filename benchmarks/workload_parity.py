"""Do our suites build the same work as PyTorch's harness? Compare the two, model by model.

    python -m benchmarks.workload_parity [--reference DIR] [--model NAME ...] [--test eval]
                                         [--differences FILE] [--json OUT]

For every model of the harness's lists (DIR/huggingface_models_list.txt and
DIR/timm_models_list.txt; DIR defaults to ../shared/reference/dynamobench beside the clone),
at the list's batch size, in inference and in training, the model and its inputs are built
twice: by the harness's own loaders (its huggingface.py and timm_models.py, imported from DIR
at run time and driven through their own argument parser and `load_model`), and by ours
(models/). Both are built on the meta device: no weights are initialised and no arithmetic
runs, so a model of billions of parameters costs a second. Each gets the workload signature
the runner writes in every line (child/workload.py), and the two are compared field by
field: the parameters (count, bytes, dtypes), the buffers, every input (name, shape, dtype,
memory format, kind of values where both have values), the fields of the inference output
(a cache returned is work done) and the FLOPs of one iteration (FlopCounterMode: forward in
inference; forward, loss and backward in training) must be equal.
The optimizer each trains with on CUDA is compared too, and the inductor settings each
compiles the model with (the harness sets some per model in its load_model).

One row per model and test. The exit status is 1 when a difference is not listed in the file
of deliberate differences (--differences, benchmarks/workload_differences.json), each entry
of which carries its measured reason; models the harness itself cannot build offline are
listed with its error and are not failures. --model selects models by name (repeatable; a
name of either list, a timm name with or without its tag).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

ROOT = Path(__file__).resolve().parents[1]

DEFAULT_REFERENCE = ROOT.parent / "shared" / "reference" / "dynamobench"
DEFAULT_DIFFERENCES = ROOT / "benchmarks" / "workload_differences.json"
TESTS = ("eval", "train")
#: Integer inputs with fewer elements than this are too few draws to compare their ranges.
FEW_VALUES = 64
#: Two observed integer ranges are the same kind when their overlap covers this much of both.
RANGE_OVERLAP = 0.9

log = logging.getLogger("workload_parity")


@dataclass(frozen=True)
class ListedModel:
    """A model of one of the harness's lists: its suite, its name there, our name, batch size."""

    suite: str
    harness_name: str
    our_name: str
    batch_size: int


@dataclass
class Row:
    model: ListedModel
    test: str
    status: str = ""  # same, explained, DIFFERENT, harness cannot build, ours cannot build
    differences: list[str] = field(default_factory=list)
    explained: list[str] = field(default_factory=list)
    harness_error: Optional[str] = None
    our_error: Optional[str] = None
    harness_flops: Optional[int] = None
    our_flops: Optional[int] = None
    seconds: float = 0.0


def listed_models(reference: Path) -> list[ListedModel]:
    """Both lists, in their order: Hugging Face (name,batch) then timm (name batch)."""
    models = []
    for line in (reference / "huggingface_models_list.txt").read_text().splitlines():
        if line.strip():
            name, batch = line.split(",")
            models.append(ListedModel("huggingface", name.strip(), name.strip(), int(batch)))
    for line in (reference / "timm_models_list.txt").read_text().splitlines():
        if line.strip():
            name, batch = line.split()
            models.append(ListedModel("timm", name, name.split(".")[0], int(batch)))
    return models


# The harness's side.

@contextlib.contextmanager
def harness_on_path(reference: Path) -> Iterator[None]:
    """The harness's folder first on sys.path and as the working folder (it reads its YAML
    files and lists relative to itself)."""
    sys.path.insert(0, str(reference))
    previous = os.getcwd()
    os.chdir(reference)
    try:
        yield
    finally:
        os.chdir(previous)
        sys.path.remove(str(reference))


def provide_names_older_torch_lacks() -> None:
    """The harness imports two helpers that torch releases before 2.11 lack
    (torch._dynamo.utils.bitwise_same, used by its accuracy checks, and
    copy_dynamo_tensor_attributes, which keeps dynamic-shape markings when it casts inputs).
    Neither runs on the paths compared here; where torch has them, nothing changes."""
    import torch._dynamo.utils as dynamo_utils

    if not hasattr(dynamo_utils, "bitwise_same"):
        def bitwise_same(ref, res, equal_nan=False):
            raise NotImplementedError("bitwise_same needs torch 2.11 (accuracy checks only)")

        dynamo_utils.bitwise_same = bitwise_same
    if not hasattr(dynamo_utils, "copy_dynamo_tensor_attributes"):
        dynamo_utils.copy_dynamo_tensor_attributes = lambda source, target: None


@contextlib.contextmanager
def torch_xla_hidden():
    """torch_xla made unimportable for a while, where it is not imported yet. The harness's
    common.py imports it when it can, and importing it changes dynamo's settings
    (automatic_dynamic_shapes off, specialize_float on); the card the harness is compared on
    has no torch_xla, so the harness here must not see it either."""
    hide = "torch_xla" not in sys.modules
    if hide:
        sys.modules["torch_xla"] = None  # type: ignore[assignment]  # import raises ImportError
    try:
        yield
    finally:
        if hide and sys.modules.get("torch_xla", "") is None:
            del sys.modules["torch_xla"]


class Harness:
    """The harness's runners, imported once from `reference` (without torch_xla, as on the
    card)."""

    def __init__(self, reference: Path) -> None:
        self.reference = reference
        provide_names_older_torch_lacks()
        with harness_on_path(reference), contextlib.redirect_stdout(io.StringIO()), \
                torch_xla_hidden():
            import common  # noqa: F401  (the harness's own module)
            import huggingface
            import timm_models
        self.common = sys.modules["common"]
        self.modules = {"huggingface": huggingface, "timm": timm_models}
        self.runner_classes = {"huggingface": huggingface.HuggingfaceRunner,
                               "timm": timm_models.TimmRunner}

    def runner(self, model: ListedModel, test: str, batch_size: Optional[int] = None,
               flags: tuple[str, ...] = ()):
        """A runner set up as the harness's main sets it up for one model (at the list's
        batch size unless given; `flags`: more of its options, such as a precision)."""
        args = self.common.parse_args([
            "--performance", "--training" if test == "train" else "--inference",
            "--device", "cpu", "--only", model.harness_name,
            "--batch-size", str(batch_size or model.batch_size), "--backend", "inductor",
            *flags])
        runner = self.runner_classes[model.suite]()
        runner.args = args
        runner.model_iter_fn = (runner.forward_and_backward_pass if test == "train"
                                else runner.forward_pass)
        return runner

    def signature(self, model: ListedModel, test: str) -> dict[str, Any]:
        """Its model and inputs built by its load_model on meta tensors, or on fake ones
        where meta cannot answer (the rule ours follows: child/workload.py),
        described as ours are."""
        from api import on_meta_or_fake

        def count(place: str) -> dict[str, Any]:
            try:
                return self._signature(model, test, place)
            except RuntimeError as error:
                cause = error.__cause__ or error
                if place == "meta" and "meta tensors" in str(cause):
                    return {"flops_per_iteration": None, "flops_error": str(cause)}
                raise

        def count_or_cause(place: str) -> dict[str, Any]:
            try:
                return count(place)
            except RuntimeError as error:  # the harness's "Eager run failed": say why
                cause = error.__cause__
                if cause is None:
                    raise
                raise RuntimeError(f"{error} ({type(cause).__name__}: {cause})") from cause

        found = on_meta_or_fake(count_or_cause)
        if "parameters" not in found:
            raise RuntimeError(f"cannot build on meta or fake tensors: {found['flops_error']}")
        return found

    def _signature(self, model: ListedModel, test: str, place: str) -> dict[str, Any]:
        import torch

        from api import IterationSpec, fake_mode, make_fake, to_fake, workload_signature

        runner = self.runner(model, test)
        iteration_function = runner.model_iter_fn
        captured: list[tuple[Any, Any]] = []

        def capturing(module, inputs, collect_outputs=True):
            # The harness validates the model it built by one iteration on copies of it and
            # of its inputs (validate_model): they are kept, should meta tensors fail it.
            captured.append((module, inputs))
            return iteration_function(module, inputs, collect_outputs=collect_outputs)

        runner.model_iter_fn = capturing
        validated = True
        batch_size = model.batch_size
        try:
            with harness_on_path(self.reference), torch.device("meta"), \
                    inductor_settings_set() as inductor_settings:
                _, _, module, inputs, batch_size = runner.load_model(
                    "meta", model.harness_name, batch_size=model.batch_size)
        except RuntimeError as error:
            if not captured or "meta tensors" not in str(error.__cause__):
                raise
            (module, inputs), validated = captured[0], False
        runner.model_iter_fn = iteration_function
        mode = fake_mode() if place == "fake" else None
        if mode is not None:
            make_fake(module, mode)
            inputs = to_fake(inputs, mode)
        args, kwargs = ((), dict(inputs)) if isinstance(inputs, dict) else (tuple(inputs), {})
        real = self.real_inputs(model, module, batch_size) if model.suite == "huggingface" else None

        def iteration() -> Any:
            with (mode if mode is not None else torch.device("meta")), \
                    runner.pick_grad(model.harness_name, test == "train"):
                return runner.model_iter_fn(module, inputs, collect_outputs=False)

        runner.init_optimizer(model.harness_name, "cuda", list(module.parameters()))
        optimizer = describe_optimizer(runner.optimizer) if test == "train" else None
        runner.optimizer = None  # the count runs as on the CPU: a meta step is not capturable
        spec = IterationSpec(mode=test, optimizer=optimizer,
                               loss=type(runner).compute_loss.__qualname__,
                               inductor_settings=inductor_settings)
        signature = workload_signature(module, (args, kwargs, None), spec, iteration,
                                real_inputs=real)
        signature["batch_size"] = batch_size
        signature["counted_on"] = f"{place} tensors"
        signature["harness_validation"] = ("passed" if validated
                                           else "its eager check reads values meta tensors lack")
        return signature

    def real_inputs(self, model: ListedModel, module, batch_size: int):
        """The harness's Hugging Face inputs again, on the CPU, for their values (its
        generate_inputs_for_model reads only the model's config)."""
        hf = self.modules["huggingface"]
        self.common.reset_rng_state()
        model_class, _ = self.runner(model, "eval")._get_model_cls_and_config(model.harness_name)
        inputs = hf.generate_inputs_for_model(model_class, module, model.harness_name,
                                              batch_size, "cpu", include_loss_args=True)
        return ((), inputs, None)


@contextlib.contextmanager
def inductor_settings_set() -> Iterator[dict[str, Any]]:
    """The inductor settings the harness's load_model sets for a model (the yielded dict,
    filled on exit: config name -> value, where it differs from before), each set back on
    exit so that the next model starts from inductor's own."""
    from torch._inductor import config

    before = config.get_config_copy()
    found: dict[str, Any] = {}
    try:
        yield found
    finally:
        after = config.get_config_copy()
        for name, value in after.items():
            if value != before.get(name):
                found[name] = value
                setattr(config, name, before[name])


def describe_optimizer(optimizer) -> Optional[dict[str, Any]]:
    """The optimizer's class and the settings ours records (lr, capturable, foreach), and
    whether its step is compiled (the harness leaves SGD's out)."""
    if optimizer is None:
        return None
    defaults = optimizer.defaults
    described: dict[str, Any] = {"name": type(optimizer).__name__, "lr": defaults.get("lr")}
    for key in ("capturable", "foreach"):
        if defaults.get(key):
            described[key] = True
    described["compiled_step"] = not hasattr(optimizer.step, "_torchdynamo_disable")
    return described


# Our side.

def our_signature(model: ListedModel, test: str) -> dict[str, Any]:
    from core.config import ExperimentConfig
    from api import get_suite
    from api import our_signature as signature

    experiment = ExperimentConfig("cuda", None, "inductor", None, test,
                                  optimizer="harness" if test == "train" else None)
    suite = get_suite(model.suite)
    suite.check_model(model.our_name)
    return signature(suite, model.our_name, experiment, model.batch_size)


# The comparison.

def compare(harness: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    """Every field where the two signatures differ, as 'field: harness vs ours'."""
    differences = []

    def check(name: str, theirs: Any, mine: Any) -> None:
        if theirs != mine:
            differences.append(f"{name}: {theirs} vs {mine}")

    for group in ("parameters", "buffers"):
        for key in ("count", "bytes", "dtypes", "requires_grad"):
            if key in harness[group] or key in ours[group]:
                check(f"{group}.{key}", harness[group].get(key), ours[group].get(key))
    check("batch_size", harness.get("batch_size"), ours.get("batch_size"))
    theirs = {item["name"]: item for item in harness["inputs"]}
    mine = {item["name"]: item for item in ours["inputs"]}
    check("inputs.names", sorted(theirs), sorted(mine))
    for name in sorted(set(theirs) & set(mine)):
        for key in ("shape", "dtype", "memory_format"):
            check(f"inputs.{name}.{key}", theirs[name][key], mine[name][key])
        if not same_kind(theirs[name], mine[name]):
            check(f"inputs.{name}.values", theirs[name]["values"], mine[name]["values"])
    check("flops_per_iteration", harness.get("flops_per_iteration"), ours.get("flops_per_iteration"))
    if harness.get("outputs") is not None and ours.get("outputs") is not None:
        check("outputs", harness["outputs"], ours["outputs"])
    check("optimizer", harness.get("optimizer"), ours.get("optimizer"))
    check("inductor_settings", harness.get("inductor_settings") or {},
          ours.get("inductor_settings") or {})
    # Dropout costs time and no FLOPs: the iteration must draw as many random masks.
    check("random_operators", harness.get("random_operators"), ours.get("random_operators"))
    check("active_dropout", harness.get("active_dropout"), ours.get("active_dropout"))
    # and drop with the same probabilities (fused attention's kernel time depends on them).
    check("dropout_probabilities", harness.get("dropout_probabilities"),
          ours.get("dropout_probabilities"))
    return differences


def same_kind(theirs: dict[str, Any], mine: dict[str, Any]) -> bool:
    """Kinds of values agree: where either is unknown (a meta tensor), yes; integers when
    their observed ranges overlap over RANGE_OVERLAP of both (or are too few to tell);
    floats by their kind (normalised or not)."""
    a, b = theirs["values"], mine["values"]
    if "unknown" in a["kind"] or "unknown" in b["kind"]:
        return True
    if a["kind"] != b["kind"]:
        return False
    if a["kind"] != "integers":
        return True
    elements = min(_count(theirs["shape"]), _count(mine["shape"]))
    if elements < FEW_VALUES:
        return True
    low, high = max(a["min"], b["min"]), min(a["max"], b["max"])
    overlap = max(high - low + 1, 0)
    return all(overlap >= RANGE_OVERLAP * (r["max"] - r["min"] + 1) for r in (a, b))


def _count(shape: list[int]) -> int:
    total = 1
    for size in shape:
        total *= size
    return total


def load_differences(path: Path) -> dict[tuple[str, str], list[dict[str, str]]]:
    """Deliberate differences by (model, test): entries of {model, test, field, reason}; a
    test of "*" covers both."""
    if not path.exists():
        return {}
    found: dict[tuple[str, str], list[dict[str, str]]] = {}
    for entry in json.loads(path.read_text())["differences"]:
        for test in (TESTS if entry.get("test", "*") == "*" else (entry["test"],)):
            found.setdefault((entry["model"], test), []).append(entry)
    return found


def short(error: BaseException) -> str:
    """An exception in one line, with its cause (the harness wraps its own failures)."""
    text = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    cause = error.__cause__ or error.__context__
    if cause is not None and cause is not error:
        text += f" (from {type(cause).__name__}: {str(cause).splitlines()[0][:300] if str(cause) else ''})"
    return text[:400]


def parity_row(harness: Optional[Harness], harness_failure: Optional[str], model: ListedModel,
               test: str, deliberate: dict) -> Row:
    row = Row(model, test)
    start = time.perf_counter()
    theirs = ours = None
    if harness is None:
        row.harness_error = harness_failure
    else:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                theirs = harness.signature(model, test)
        except Exception as error:  # the harness cannot build it (offline): listed, not failed
            row.harness_error = short(error)
    try:
        ours = our_signature(model, test)
    except Exception as error:
        row.our_error = short(error)
    row.seconds = time.perf_counter() - start
    if theirs is not None:
        row.harness_flops = theirs.get("flops_per_iteration")
    if ours is not None:
        row.our_flops = ours.get("flops_per_iteration")
    if theirs is None:
        row.status = "harness cannot build"
        return row
    if ours is None:
        row.status = "ours cannot build"
        row.differences.append(f"ours: {row.our_error}")
        return row
    found = compare(theirs, ours)
    entries = deliberate.get((model.harness_name, test), [])
    for difference in found:
        if any(difference.startswith(entry["field"]) for entry in entries):
            row.explained.append(difference)
        else:
            row.differences.append(difference)
    if row.differences:
        row.status = "DIFFERENT"
    elif row.explained:
        row.status = "explained"
    else:
        row.status = "same"
    if theirs.get("flops_error") and ours.get("flops_error"):
        row.status += " (FLOPs not countable on meta by either)"
    return row


def flops_text(value: Optional[int]) -> str:
    return "-" if value is None else f"{value / 1e9:,.1f} G"


def print_row(row: Row) -> None:
    model = row.model
    print(f"{model.suite:<11} {model.harness_name:<38} {model.batch_size:>4} {row.test:<5} "
          f"{flops_text(row.harness_flops):>14} {flops_text(row.our_flops):>14} "
          f"{row.seconds:6.1f}s  {row.status}", flush=True)
    for difference in row.differences:
        print(f"    differs: {difference}", flush=True)
    for difference in row.explained:
        print(f"    deliberate: {difference}", flush=True)
    if row.harness_error:
        print(f"    harness: {row.harness_error}", flush=True)
    elif row.our_error and row.status != "ours cannot build":
        print(f"    ours: {row.our_error}", flush=True)


def selected(models: list[ListedModel], names: list[str]) -> list[ListedModel]:
    if not names:
        return models
    chosen = [m for m in models if m.harness_name in names or m.our_name in names]
    unknown = sorted(set(names) - {m.harness_name for m in chosen} - {m.our_name for m in chosen})
    if unknown:
        raise SystemExit(f"--model: {', '.join(unknown)} is not in the harness's lists")
    return chosen


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE,
                        help="the harness's folder (default: %(default)s)")
    parser.add_argument("--model", action="append", default=[],
                        help="compare only this model (repeatable)")
    parser.add_argument("--test", action="append", choices=TESTS,
                        help="eval or train (repeatable; default: both)")
    parser.add_argument("--differences", type=Path, default=DEFAULT_DIFFERENCES,
                        help="the deliberate differences (default: %(default)s)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    options = parser.parse_args(argv)
    if not (options.reference / "huggingface_models_list.txt").exists():
        print(f"--reference {options.reference}: no huggingface_models_list.txt there",
              file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.ERROR)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import warnings

    warnings.filterwarnings("ignore")
    models = selected(listed_models(options.reference), options.model)

    deliberate = load_differences(options.differences)
    start, cpu_start = time.perf_counter(), time.process_time()
    harness, failure = None, None
    try:
        harness = Harness(options.reference.resolve())
    except Exception as error:
        failure = f"the harness cannot be imported: {short(error)}"
    print(f"{'suite':<11} {'model':<38} {'bs':>4} {'test':<5} {'harness FLOPs':>14} "
          f"{'our FLOPs':>14} {'time':>7}  status")
    rows = []
    for model in models:
        for test in options.test or TESTS:
            row = parity_row(harness, failure, model, test, deliberate)
            print_row(row)
            rows.append(row)
    counts: dict[str, int] = {}
    for row in rows:
        key = row.status.split(" (")[0]
        counts[key] = counts.get(key, 0) + 1
    unexplained = sum(1 for row in rows if row.differences)
    print(f"\n{len(rows)} comparisons of {len(models)} models: "
          + ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))
          + f"; {unexplained} with unexplained differences"
          + f" ({time.perf_counter() - start:.0f} s wall, {time.process_time() - cpu_start:.0f} s CPU)")
    if options.json:
        options.json.write_text(json.dumps([{
            "suite": r.model.suite, "model": r.model.harness_name, "batch_size": r.model.batch_size,
            "test": r.test, "status": r.status, "differences": r.differences,
            "explained": r.explained, "harness_error": r.harness_error,
            "our_error": r.our_error, "harness_flops": r.harness_flops,
            "our_flops": r.our_flops} for r in rows], indent=1))
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
