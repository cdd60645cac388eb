"""The graphs each tool hands the compiler, compared on the CPU.

    python -m benchmarks.fidelity.graph_parity --model NAME [--model NAME ...] [--test eval|train]
        [--batch-size N] [--precision P] [--optimizer none|harness] [--reference DIR]

`workload_parity.py` checks that both tools do the same work (parameters, inputs, FLOPs);
this checks that they hand inductor the same graphs for it. For each chosen model of the
harness's lists, PyTorch's harness (its own loaders and iteration, imported from DIR) and our
runner (our suites and our prepared model, as a timing child builds them) each run one
iteration compiled by a backend that records, per graph dynamo captures:

- the settings it is compiled under: inductor's, dynamo's and functorch's configs and torch's
  numerics switches (TF32 in matmuls and convolutions, cudnn.benchmark, SDPA's
  reduced-precision reductions);
- its inputs (dtype, shape and, where not contiguous, strides: inductor picks its kernels'
  layouts from them);
- its outputs (dtype and shape of each) and whether autocast is entered inside it (shown,
  not a difference by itself: the operators say what runs);
- the forward and backward graphs AOTAutograd makes of it with inductor's decompositions and
  partitioner: their operators in order, each with the dtype it produces.

Each tool runs in a child process of its own (the harness sets torch's switches when it is
imported). Precision as in the GPU table unless `--precision` names one: bf16 for Hugging
Face inference, amp otherwise, both on the CPU (autocast to bf16 there). Off CUDA neither tool
trains with an optimizer; `--optimizer harness` has each make the one it makes on CUDA (its
own code: the harness's init_optimizer, ours' optimizer_settings), without `capturable`,
which needs parameters on CUDA. A graph captured again with the same record counts once.
Where the two sides capture different numbers of graphs, the row names the frame each graph
starts in; where their graph breaks differ, it shows each side's by reason (a note: the
harness's iteration breaks in frames of its own). One row per model and test; the exit
status is 1 on any difference or failure.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[2]

from benchmarks.fidelity.fidelity_cases import HARNESS_PRECISION_FLAGS
from benchmarks.fidelity.workload_parity import (DEFAULT_REFERENCE, TESTS, ListedModel,
                                        listed_models, selected)

#: How many operator differences a row names.
SHOWN = 6
#: The recording backend's name for our runner's dynamo stack.
RECORDER = "graph_parity_recorder"
#: --optimizer: none (as both tools train off CUDA), or the one each makes on CUDA.
OPTIMIZERS = ("none", "harness")


def precision_of(model: ListedModel, test: str) -> str:
    """The GPU table's precision: bf16 for Hugging Face inference, amp otherwise."""
    return "bf16" if model.suite == "huggingface" and test == "eval" else "amp"


# Recording (in each side's child process).

class GraphRecorder:
    """A dynamo backend that records each graph and AOTAutograd's forward and backward of it,
    then stands in for them with outputs of the shapes, strides and dtypes they record,
    computed by nothing (`outputs_only`): the graphs are what is compared, and running
    them took most of a side's time (DistilBERT's training on the CPU, 74 of 85 CPU-s)."""

    def __init__(self) -> None:
        self.graphs: list[dict[str, Any]] = []

    def backend(self, graph_module, example_inputs):
        import torch
        from functorch.compile import make_boxed_func
        from torch._functorch.aot_autograd import aot_module_simplified
        from torch._functorch.partitioners import min_cut_rematerialization_partition
        from torch._inductor.decomposition import select_decomp_table
        # Some of inductor's decompositions (max_pool2d's) consult its lowerings, which
        # only compiling with inductor would have imported.
        import torch._inductor.lowering  # noqa: F401

        record = {"frame": compiled_frame(),
                  "settings": compiler_settings(),
                  "inputs": [describe_layout(value) for value in example_inputs],
                  "outputs": graph_outputs(graph_module),
                  "autocast": any("_enter_autocast" in str(node.target)
                                  for node in graph_module.graph.nodes)}
        self.graphs.append(record)

        def recording(kind: str):
            # Out of dynamo's sight: AOTAutograd compiles the backward on its first call,
            # inside a compiled frame's backward, where dynamo would trace the recorder's own
            # frames and count their graph breaks as the model's.
            @torch._dynamo.disable
            def compile_graph(graph, inputs):
                record[kind] = operators(graph)
                return make_boxed_func(torch._dynamo.disable(outputs_only(graph)))
            return compile_graph

        return aot_module_simplified(
            graph_module, example_inputs, fw_compiler=recording("forward"),
            bw_compiler=recording("backward"),
            partition_fn=min_cut_rematerialization_partition,
            decompositions=select_decomp_table())


def outputs_only(graph):
    """A function that returns what `graph` returns, as uninitialised tensors of the shapes,
    strides, dtypes and devices its output nodes record (and their constants as they are),
    without running its operators. A value that is not recorded runs the graph instead."""
    import torch
    from torch.utils._pytree import tree_leaves, tree_map

    returned = next(node for node in graph.graph.nodes if node.op == "output").args[0]
    values = tree_map(lambda item: item.meta.get("val") if isinstance(item, torch.fx.Node)
                      else item, returned)
    recorded = all(isinstance(value, torch.Tensor) or value is None
                   or type(value) in (int, float, bool) for value in tree_leaves(values))
    if not recorded:
        return graph.forward

    def run(*args):
        return tree_map(lambda value: torch.empty_strided(
            value.shape, value.stride(), dtype=value.dtype, device=value.device)
            if isinstance(value, torch.Tensor) else value, values)

    return run


def compiled_frame() -> str:
    """The function whose frame dynamo is compiling, as `name (file:line)`: where the graph
    starts (a resume function's name says after which line of its function)."""
    from torch._dynamo.symbolic_convert import InstructionTranslator

    translator = InstructionTranslator.current_tx()
    if translator is None:
        return "?"
    code = translator.f_code
    return f"{code.co_name} ({Path(code.co_filename).name}:{code.co_firstlineno})"


def describe_value(value: Any) -> str:
    shape = getattr(value, "shape", None)
    if shape is None:
        return type(value).__name__
    return f"{str(value.dtype).replace('torch.', '')}{list(shape)}"


def compiler_settings() -> dict[str, str]:
    """The settings that shape the compiled code, as the backend is called: inductor's,
    dynamo's and functorch's configs and torch's numerics switches, each as text."""
    import torch

    settings = {}
    for prefix, config in (("inductor", torch._inductor.config), ("dynamo", torch._dynamo.config),
                           ("functorch", torch._functorch.config)):
        for key, value in config.get_config_copy().items():
            settings[f"{prefix}.{key}"] = repr(sorted(value, key=repr)
                                              if isinstance(value, (set, frozenset)) else value)
    settings.update({
        "matmul.fp32_precision": torch.backends.cuda.matmul.fp32_precision,
        "cudnn.conv.fp32_precision": torch.backends.cudnn.conv.fp32_precision,
        "cudnn.benchmark": repr(torch.backends.cudnn.benchmark),
        "fp16_bf16_reduction_math_sdp": repr(
            torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed()),
    })
    return settings


def describe_layout(value: Any) -> str:
    """A graph input's dtype and shape, and its strides where it is not contiguous: inductor
    chooses its kernels' layouts from them."""
    text = describe_value(value)
    is_contiguous = getattr(value, "is_contiguous", None)
    if is_contiguous is not None and not is_contiguous():
        text += f" stride{list(value.stride())}"
    return text


def graph_outputs(graph_module) -> list[str]:
    output = next(node for node in graph_module.graph.nodes if node.op == "output")
    values = output.args[0] if isinstance(output.args[0], (tuple, list)) else [output.args[0]]
    return [describe_value(getattr(value, "meta", {}).get("example_value"))
            for value in values]


def operators(graph_module) -> list[str]:
    """Each call's target and the dtype it produces, in order."""
    found = []
    for node in graph_module.graph.nodes:
        if node.op != "call_function":
            continue
        dtype = getattr(node.meta.get("val"), "dtype", None)
        found.append(f"{node.target}:{str(dtype).replace('torch.', '') if dtype else '-'}")
    return found


def without_capturable(optimizer) -> None:
    """The optimizer's step made as on parameters off CUDA: `capturable` keeps its scalars
    on a device that captures, which the CPU is not (ours' make_optimizer drops it there)."""
    for group in optimizer.param_groups:
        if "capturable" in group:
            group["capturable"] = False


def harness_graphs(reference: Path, model: ListedModel, test: str, batch_size: int,
                   precision: str, optimizer: str = "none") -> list[dict[str, Any]]:
    """The harness's iteration (forward_pass or forward_and_backward_pass) on its own model
    and inputs, cast as its main casts them, compiled by the recorder; with its CUDA
    optimizer (its init_optimizer) where `optimizer` is harness."""
    import torch

    from benchmarks.fidelity.workload_parity import Harness, harness_on_path

    runner = Harness(reference).runner(model, test, batch_size,
                                       (HARNESS_PRECISION_FLAGS[precision],))
    runner.setup_amp()
    # Its load_model runs the model once in eager on a copy (validate_model), which captures
    # no graph and leaves the model and inputs it returns as they were: most of this side's
    # time on the CPU (45 of 67 CPU-s for DistilBERT's training).
    runner.validate_model = lambda name, module, inputs: None
    with harness_on_path(reference):
        _, _, module, inputs, _ = runner.load_model("cpu", model.harness_name,
                                                    batch_size=batch_size)
    module, inputs = runner.cast_based_on_args(module, inputs)
    if optimizer == "harness" and test == "train":
        runner.init_optimizer(model.harness_name, "cuda", module.parameters())
        if runner.optimizer is not None:
            without_capturable(runner.optimizer)
    recorder = GraphRecorder()
    compiled = torch._dynamo.optimize(recorder.backend)(runner.model_iter_fn)
    with runner.pick_grad(model.harness_name, test == "train"):
        compiled(module, inputs, collect_outputs=False)
    return recorder.graphs


def our_graphs(model: ListedModel, test: str, batch_size: int, precision: str,
               optimizer: str = "none") -> list[dict[str, Any]]:
    """Our iteration, prepared by our dynamo stack as a timing child prepares it, with the
    recorder registered as the stack's backend; with the optimizer ours makes on CUDA
    (--optimizer=harness) where `optimizer` is harness."""
    import torch

    from api import DYNAMO_STACK as STACK
    from api import HARNESS_OPTIMIZER as HARNESS
    from api import apply_numerics, make_optimizer, optimizer_settings
    from core.config import ExperimentConfig, RunSettings
    from api import get_suite

    recorder = GraphRecorder()

    def recording_backend(graph_module, example_inputs):
        return recorder.backend(graph_module, example_inputs)

    torch._dynamo.register_backend(recording_backend, name=RECORDER)
    experiment = ExperimentConfig("cpu", None, RECORDER, None, test, precision=precision)
    apply_numerics(experiment)
    bench = get_suite(model.suite).load(model.our_name, test, batch_size, seed=experiment.seed)
    prepared = STACK.prepare(bench, experiment, RunSettings())
    settings = optimizer_settings(HARNESS, bench.harness_optimizer)
    if optimizer == "harness" and test == "train" and settings is not None:
        prepared.optimizer = make_optimizer(settings, prepared.parameters)
    prepared.step(prepared.inputs_to_device(bench.make_inputs(experiment.seed)))
    return recorder.graphs


def graph_breaks() -> dict[str, int]:
    """Dynamo's graph breaks so far in this process: the first line of each reason, counted."""
    from torch._dynamo.utils import counters

    found: dict[str, int] = {}
    for reason, count in counters["graph_break"].items():
        lines = str(reason).strip().splitlines()
        key = lines[0][:120] if lines else "(no reason given)"
        found[key] = found.get(key, 0) + int(count)
    return found


def record_side(side: str, reference: Path, model: ListedModel, test: str, batch_size: int,
                precision: str, optimizer: str, out: Path) -> int:
    """One side, in this process: its graphs, or its error, as JSON in `out`."""
    try:
        graphs = (harness_graphs(reference, model, test, batch_size, precision, optimizer)
                  if side == "harness" else our_graphs(model, test, batch_size, precision,
                                                      optimizer))
        result: dict[str, Any] = {"graphs": graphs, "breaks": graph_breaks()}
    except Exception as error:  # the row names the side that failed, with its error
        result = {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
                  if str(error) else type(error).__name__}
    out.write_text(json.dumps(result))
    return 0


# The comparison (in the parent).

def distinct(graphs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The graphs in order, each record once."""
    seen: list[dict[str, Any]] = []
    for graph in graphs:
        if graph not in seen:
            seen.append(graph)
    return seen


def operator_differences(theirs: list[str], mine: list[str]) -> str:
    """The operators one side has more of than the other, the largest counts first."""
    counted = collections.Counter(theirs)
    counted.subtract(collections.Counter(mine))
    changed = sorted((item for item in counted.items() if item[1]),
                     key=lambda item: (-abs(item[1]), item[0]))
    shown = ", ".join(f"{name} {count:+d}" for name, count in changed[:SHOWN])
    more = f" and {len(changed) - SHOWN} more" if len(changed) > SHOWN else ""
    if not changed:
        return "the same operators in another order"
    return f"harness minus ours: {shown}{more}"


def setting_differences(index: int, theirs: dict[str, str], mine: dict[str, str]) -> list[str]:
    """The compiler settings one graph was compiled under that differ, named with both
    values."""
    changed = sorted(key for key in set(theirs) | set(mine) if theirs.get(key) != mine.get(key))
    if not changed:
        return []
    shown = "; ".join(f"{key} {theirs.get(key, 'unset')} vs {mine.get(key, 'unset')}"
                      for key in changed[:SHOWN])
    more = f" and {len(changed) - SHOWN} more" if len(changed) > SHOWN else ""
    return [f"graph {index} settings: {shown}{more}"]


def input_differences(index: int, theirs: list[str], mine: list[str]) -> list[str]:
    """How the inputs of one graph differ: their count, or the first that differs in dtype,
    shape or layout."""
    if len(theirs) != len(mine):
        return [f"graph {index} inputs: {len(theirs)} vs {len(mine)}"]
    differing = [(position, their_input, my_input) for position, (their_input, my_input)
                 in enumerate(zip(theirs, mine)) if their_input != my_input]
    if not differing:
        return []
    position, their_input, my_input = differing[0]
    return [f"graph {index} inputs: {len(differing)} of {len(theirs)} differ; the first, "
            f"input {position}: {their_input} vs {my_input}"]


def compare(theirs: list[dict[str, Any]], mine: list[dict[str, Any]]) -> list[str]:
    """Every difference between the two sides' distinct graphs, as text."""
    theirs, mine = distinct(theirs), distinct(mine)
    differences = []
    if len(theirs) != len(mine):
        differences.append(f"graphs: {len(theirs)} vs {len(mine)}")
    for index, (their_graph, my_graph) in enumerate(zip(theirs, mine)):
        differences += setting_differences(index, their_graph.get("settings", {}),
                                           my_graph.get("settings", {}))
        differences += input_differences(index, their_graph.get("inputs", []),
                                         my_graph.get("inputs", []))
        if their_graph["outputs"] != my_graph["outputs"]:
            differences.append(f"graph {index} outputs: {their_graph['outputs']} vs "
                               f"{my_graph['outputs']}")
        for kind in ("forward", "backward"):
            their_ops, my_ops = their_graph.get(kind), my_graph.get(kind)
            if their_ops == my_ops:
                continue
            if their_ops is None or my_ops is None:
                differences.append(f"graph {index} {kind}: "
                                   f"{'none' if their_ops is None else len(their_ops)} vs "
                                   f"{'none' if my_ops is None else len(my_ops)} operators")
                continue
            differences.append(f"graph {index} {kind}: {len(their_ops)} vs {len(my_ops)} "
                               f"operators; {operator_differences(their_ops, my_ops)}")
    return differences


def notes(theirs: list[dict[str, Any]], mine: list[dict[str, Any]]) -> list[str]:
    """Where autocast is entered, inside a graph or around it: not a difference by itself
    (the graphs' operators say what runs), but shown."""
    return [f"graph {index}: autocast entered {'inside' if their_graph['autocast'] else 'outside'}"
            f" the graph in the harness, {'inside' if my_graph['autocast'] else 'outside'} in ours"
            for index, (their_graph, my_graph) in enumerate(zip(distinct(theirs), distinct(mine)))
            if their_graph["autocast"] != my_graph["autocast"]]


def graph_starts(theirs: list[dict[str, Any]], mine: list[dict[str, Any]]) -> list[str]:
    """Where each side's distinct graphs start, where the sides capture different numbers of
    them (the frames of the two tools' iterations have different names)."""
    theirs, mine = distinct(theirs), distinct(mine)
    if len(theirs) == len(mine):
        return []
    return [f"{side} graph {index} starts in {graph.get('frame', '?')}"
            for side, graphs in (("harness", theirs), ("ours", mine))
            for index, graph in enumerate(graphs)]


def break_differences(theirs: dict[str, int], mine: dict[str, int]) -> list[str]:
    """Each side's graph breaks by reason, where they differ: shown, not a difference by
    itself (the harness's iteration breaks in frames of its own, such as `clone_inputs`)."""
    if theirs == mine:
        return []
    return [f"{side} breaks {sum(breaks.values())}: "
            + "; ".join(f"{reason} x{count}" for reason, count in sorted(breaks.items()))
            for side, breaks in (("harness", theirs), ("ours", mine))]


def summary(graphs: list[dict[str, Any]]) -> str:
    """'graphs/forward operators/backward operators' of the distinct graphs."""
    kept = distinct(graphs)
    forward = sum(len(graph.get("forward") or ()) for graph in kept)
    backward = sum(len(graph.get("backward") or ()) for graph in kept)
    return f"{len(kept)}/{forward}/{backward}"


def run_side(side: str, reference: Path, model: ListedModel, test: str, batch_size: int,
             precision: str, optimizer: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "graphs.json"
        command = [sys.executable, "-m", "benchmarks.fidelity.graph_parity", "--side", side,
                   "--reference", str(Path(reference).resolve()), "--model", model.harness_name,
                   "--test", test, "--batch-size", str(batch_size), "--precision", precision,
                   "--optimizer", optimizer, "--out", str(out)]
        completed = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
        if not out.exists():
            tail = (completed.stderr or completed.stdout).strip().splitlines()[-1:]
            return {"error": f"exit {completed.returncode}: {' '.join(tail)[:300]}"}
        return json.loads(out.read_text())


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE,
                        help="the harness's folder (default: %(default)s)")
    parser.add_argument("--model", action="append", default=[],
                        help="compare this model (repeatable; default: every model of both "
                             "lists, which takes hours on a small machine)")
    parser.add_argument("--test", action="append", choices=TESTS,
                        help="eval or train (repeatable; default: both)")
    parser.add_argument("--batch-size", type=int, default=2,
                        help="the batch both tools build (default %(default)s; the graphs' "
                             "operators do not depend on it)")
    parser.add_argument("--precision", choices=tuple(HARNESS_PRECISION_FLAGS),
                        help="the precision both tools run (default: the GPU table's, bf16 "
                             "for Hugging Face inference, amp otherwise)")
    parser.add_argument("--optimizer", choices=OPTIMIZERS, default="none",
                        help="training: none, as both tools train off CUDA (default), or "
                             "harness, the optimizer each makes on CUDA, made on the CPU")
    parser.add_argument("--side", choices=("harness", "ours"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.batch_size < 1:
        parser.error(f"--batch-size {options.batch_size}: must be at least 1")
    if not (options.reference / "huggingface_models_list.txt").exists():
        print(f"--reference {options.reference}: no huggingface_models_list.txt there",
              file=sys.stderr)
        return 2
    models = selected(listed_models(options.reference), options.model)
    tests = options.test or list(TESTS)
    reference = options.reference.resolve()
    if options.side:
        logging.basicConfig(level=logging.ERROR)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        return record_side(options.side, reference, models[0], tests[0], options.batch_size,
                           options.precision or precision_of(models[0], tests[0]),
                           options.optimizer, options.out)

    print(f"{'suite':<11} {'model':<38} {'test':<5} {'harness':>14} {'ours':>14} "
          f"{'time':>6}  status   (graphs/forward operators/backward operators)")
    failed = 0
    for model in models:
        for test in tests:
            start = time.perf_counter()
            precision = options.precision or precision_of(model, test)
            # The two sides are processes of their own: both at once.
            with ThreadPoolExecutor(max_workers=2) as sides:
                theirs, mine = sides.map(
                    lambda side: run_side(side, reference, model, test, options.batch_size,
                                          precision, options.optimizer), ("harness", "ours"))
            if "error" in theirs or "error" in mine:
                status = "FAILED"
                details = [f"{side}: {result['error']}" for side, result in
                           (("harness", theirs), ("ours", mine)) if "error" in result]
            else:
                differences = compare(theirs["graphs"], mine["graphs"])
                status = "DIFFERENT" if differences else "same"
                details = differences + [f"(note) {note}" for note in
                                         notes(theirs["graphs"], mine["graphs"])
                                         + graph_starts(theirs["graphs"], mine["graphs"])
                                         + break_differences(theirs.get("breaks", {}),
                                                             mine.get("breaks", {}))]
            failed += status != "same"
            their_text = summary(theirs["graphs"]) if "graphs" in theirs else "-"
            my_text = summary(mine["graphs"]) if "graphs" in mine else "-"
            print(f"{model.suite:<11} {model.harness_name:<38} {test:<5} {their_text:>14} "
                  f"{my_text:>14} {time.perf_counter() - start:>5.0f}s  {status}", flush=True)
            for detail in details:
                print(f"    {detail}", flush=True)
    rows = len(models) * len(tests)
    print(f"\n{rows} comparisons: {rows - failed} same, {failed} different or failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
