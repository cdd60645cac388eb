"""The command line's application: parse flags (runner/plan/parser.py), build a plan, run it,
print the summary.

`experiment-runner [flags]` runs a sweep; `experiment-runner report|compare|score ...`
turn results files into reports.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
import time
import uuid
from pathlib import Path
from typing import Optional, Sequence

import backends
from core.config import RunSettings
from core.fields import ACCELERATORS
from core.files.results_file import ResultsFile, ResultsFileError, ResultsRead
from core.text import PrintableFormatter, printable
from models import (
    SuiteUnavailableError,
    UnknownModelError,
    UnknownSuiteError,
    get_suite,
)
from runner.plan.matrix import (
    MatrixError,
    Plan,
    build_plan,
    config_json,
    single_plan,
    select_models,
)
from runner.plan.options import OutputOptions, ScaleOptions, WhatToRun
from runner.plan.output import OutputPathError, check_output, output_paths, prepare_output
from runner.plan.parser import (
    EXIT_BAD_INPUT,
    UsageError,
    build_parser,
    default_memory_limit,
    reduced_models,
    sweep_flags,
    torchbench_dir,
)
from runner.plan.arguments import undecodable_argument
from runner.plan.probe import compiles_on_cpu, probe_host, speculative_host
from runner.plan.resume import recorded_fingerprints
from runner.plan.slots import Slot, SlotError, plan_slots, visible_gpus
from runner.run.process import signals
from runner.run.record.claims import Claims, RunnerIdentity
from runner.run.dispatch.local import Dispatcher, LocalDispatcher
from runner.run.executor import ExecutorOptions, ExperimentExecutor, SweepInfo
from runner.run.process.guard import ProcessGuard
from runner.run.record.report_cache import refresh_report_cache
from runner.run.process.scratch import ScratchRoot
from runner.run.record.summary import sweep_summary
from runner.run.sweep import SweepReport, expected_durations, run_plan

log = logging.getLogger("experiment_runner")

#: The sweep stopped because its output could not be written (a full disk): sysexits' EX_IOERR.
EXIT_OUTPUT_FAILED = 74


def print_plan(plan: Plan) -> None:
    """Each experiment, then the flags that run exactly it (to copy and paste)."""
    for planned in plan.experiments:
        model, experiment = config_json(planned)
        print(f"{printable(planned.model.model_name)}: {planned.experiment.describe()} [{planned.label}]")
        print(f"  --model-config={shlex.quote(model)} --experiment-config={shlex.quote(experiment)}")
    print(f"{len(plan.experiments)} experiment(s) would run; "
          f"{len(plan.already_recorded)} already recorded")


def report_dropped(plan: Plan) -> None:
    """What the user asked for that cannot run here, with its reason; the combinations that
    only the expansion of unset dimensions made, and that cannot run, at debug level."""
    for refusal in plan.refusals():
        log.info("left out %s (%d configuration(s), for every model): %s", refusal.asked
                 or "every combination", refusal.combinations, refusal.reason)
    for dropped in plan.dropped:
        log.debug("dropped %s: %s", dropped.experiment.describe(), dropped.reason)


def list_models(args: argparse.Namespace) -> int:
    suite = get_suite(args.suite_name, reduced=reduced_models(args), torchbench_dir=torchbench_dir(args))
    for name in suite.model_names():
        print(f"{printable(name)}\t{suite.default_batch_size(name)}")
    return 0


def list_stacks() -> int:
    """The stacks a user runs, with their capabilities (test-only stacks left out)."""
    for stack in backends.user_stacks():
        caps = stack.capabilities
        print(f"{stack.name}: features {', '.join(sorted(caps.features)) or '-'}; "
              f"IR formats {', '.join(caps.ir_formats) or '-'}; "
              f"shares a process with eager: {'yes' if caps.shares_process_with_eager else 'no'}; "
              f"synchronization: {caps.synchronization}")
    return 0


def warm_templates(what: WhatToRun, suite, settings: RunSettings, output: OutputOptions,
                   scale: ScaleOptions) -> int:
    """While the probe runs (on a fresh host, or once its answer is a day old): start the
    server pool's templates the sweep's timing children will most likely fork from, planned
    against what the host most likely is (`speculative_host`), so that their imports and the
    probe's share the seconds instead of following one another. A template the plan does
    not use later ends unused. The number started."""
    if not scale.server_pool or scale.start_method != "forkserver" or scale.executor == "ray" \
            or output.dry_run:
        return 0
    host = speculative_host()
    request, single = what.request, what.single
    if single is not None:
        plan = single_plan(suite, single.model_config, single.experiment_config, request, host)
    else:
        plan = build_plan(suite, request, host)
    executor = ExperimentExecutor(
        ExecutorOptions(output_dir=Path(output.dirname), start_method=scale.start_method,
                        server_pool=Path(scale.server_pool),
                        sweep_preloads=sweep_preloads(plan)),
        settings, SweepInfo(run_id="warm"))
    started = executor.warm_templates(plan.experiments)
    if started:
        log.info("started %d server template(s) while the probe runs", started)
    return started


def sweep_preloads(plan) -> frozenset[tuple[str, ...]]:
    """The preloads `plan`'s experiments ask of the sweep's servers (Stack.preload_for)."""
    return frozenset(backends.get_stack(planned.experiment.stack).preload_for(planned.experiment)
                     for planned in plan.experiments)


def run_sweep(what: WhatToRun, settings: RunSettings, output: OutputOptions,
              scale: ScaleOptions, argv: Sequence[str]) -> int:
    """Plan the experiments the flags ask for, run them and record their lines."""
    started = output.timestamp if output.timestamp is not None else time.time()
    check_ray(scale)
    request, single = what.request, what.single
    suite = get_suite(what.suite_name, reduced=request.reduced, torchbench_dir=request.torchbench_dir)
    paths = output_paths(output.dirname, output.basename)
    results_path = paths.results
    if single is None:  # bad regexes and tiers fail before the probe
        select_models(suite, request.filters, request.excludes, request.filter_tiers,
                      request.exclude_tiers)
    if not output.dry_run:
        check_output(paths, output.dirname)
    host = probe_host(use_cache=output.probe_cache,
                      with_compiler_checks=single is not None
                      or compiles_on_cpu(dict(request.dimensions)),
                      while_probing=lambda: warm_templates(what, suite, settings, output, scale))
    if host.torch_error:
        log.warning("PyTorch is not usable here: %s", host.torch_error)
    results = ResultsFile(results_path)
    if not output.resume or single is not None:  # a single experiment: recorded or not
        known = ResultsRead()
    else:
        known = results.read_for_appending()
    if single is not None:
        plan = single_plan(suite, single.model_config, single.experiment_config, request, host)
    else:
        plan = build_plan(suite, request, host, recorded_fingerprints(known.lines, settings))
    report_dropped(plan)
    log.info("Number of selected experiment configs: %d", plan.configuration_count)
    log.info("Number of selected model configs: %d", len(plan.model_names))
    if not plan.model_names:
        print(f"partition {request.partition_id} of {request.total_partitions} holds no model "
              "that the filters select")
    slots = sweep_slots(scale, plan, host)
    if output.dry_run:
        print_plan(plan)
        return 0
    # Made once the plan holds something to run: a refused request leaves no folder behind.
    prepare_output(paths, output.dirname)
    if not output.resume:
        backup = results.backup()
        if backup:
            print(f"previous results kept in {printable(backup)}")
    if plan.already_recorded:
        print(f"{len(plan.already_recorded)} experiment(s) already recorded in {printable(results_path)}; "
              "skipping them (--no-resume starts over)")
    executor = ExperimentExecutor(
        ExecutorOptions(
            output_dir=Path(output.dirname),
            timeout_seconds=output.subprocess_timeout,
            memory_limit_bytes=output.memory_limit_bytes or default_memory_limit(len(slots)),
            print_subprocess=output.print_subprocess,
            log_level=output.log_level.upper(),
            start_method=scale.start_method,
            server_pool=Path(scale.server_pool) if scale.server_pool else None,
            host_variables=tuple(sorted(host.child_environment.items())),
            sweep_preloads=sweep_preloads(plan),
        ),
        settings,
        SweepInfo(run_id=uuid.uuid4().hex[:12], command=shlex.join(["experiment-runner", *argv]),
                  timestamp=started,
                  accelerator_models={name: host.accelerator_model(name) for name in ACCELERATORS}),
        guard=ProcessGuard(),
        scratch=ScratchRoot(),
    )
    claims = Claims(results, settings, RunnerIdentity.of_this_process(executor.sweep.run_id),
                    known=known, resume=single is None)
    report = SweepReport()
    if len(slots) > 1:
        log.info("running %d experiments at a time: %s", len(slots),
                 "; ".join(slot.describe() for slot in slots))
    try:
        executor.start()
        if scale.executor != "ray":  # a Ray task starts its own children, by spawn
            executor.prestart_servers(plan.experiments)
        dispatcher = sweep_dispatcher(scale, executor, slots, plan)
        run_plan(plan, suite, dispatcher, claims, report,
                 show_progress=output.progress, no_skip=what.no_skip,
                 durations=expected_durations(known.lines),
                 remeasure_slow=settings.remeasure_slow, slow_wait_s=settings.slow_wait)
    except KeyboardInterrupt as stop:
        print(f"\n{signals.describe(stop)}: {len(report.lines)} experiment(s) finished and "
              f"recorded in {results_path}; run the same command again to resume",
              file=sys.stderr)
        return signals.exit_status(stop)
    except OSError as error:
        print(f"experiment-runner: error: {error.filename or 'output'}: "
              f"{error.strerror or error}; the sweep stopped, the lines already in "
              f"{results_path} are intact ({len(report.lines)} from this run); run the same "
              "command again to resume", file=sys.stderr)
        return EXIT_OUTPUT_FAILED
    finally:
        with signals.deferred():
            executor.close()
    print(sweep_summary(plan.requested, report.lines, results.read().lines, results_path,
                        paths.folder, settings, report.recorded_elsewhere))
    refresh_report_cache(results_path)
    return 0


def sweep_slots(scale: ScaleOptions, plan: Plan, host) -> list[Slot]:
    """The slots --jobs, --devices and --experiments-per-gpu ask for, checked against this
    machine."""
    uses_cuda = plan.asks_for("cuda")
    try:
        return plan_slots(scale.jobs, list(scale.devices), uses_cuda,
                          visible_gpus(len(host.cuda_device_names)),
                          sorted(os.sched_getaffinity(0)), scale.per_gpu,
                          shareable=scale.executor == "local" and gpus_shareable(plan),
                          experiments=len(plan.experiments))
    except SlotError as error:
        raise UsageError(str(error)) from error


def gpus_shareable(plan: Plan) -> bool:
    """Whether every experiment the sweep runs may share its GPU with others
    (--experiments-per-gpu=auto): all are CUDA ones, of stacks that share a GPU. A CPU
    experiment's figures depend on the cores it gets, so a sweep with any keeps one
    experiment a GPU."""
    return all(planned.experiment.accelerator == "cuda"
               and backends.get_stack(planned.experiment.stack).shares_a_gpu
               for planned in plan.experiments)


def check_ray(scale: ScaleOptions) -> None:
    """Ray is there when --executor=ray asks for it."""
    if scale.executor != "ray":
        return
    from runner.run.dispatch.ray_cluster import RayUnavailableError, import_ray

    try:
        import_ray(scale.ray_address)
    except RayUnavailableError as error:
        raise UsageError(str(error)) from None


def sweep_dispatcher(scale: ScaleOptions, executor: ExperimentExecutor,
                     slots: Sequence[Slot], plan: Plan) -> Dispatcher:
    """Where the experiments run: this machine's slots, or a Ray cluster."""
    if scale.executor != "ray":
        return LocalDispatcher(executor, slots)
    from runner.run.dispatch.ray_cluster import RayClusterError, RayDispatcher, RayOptions

    options = RayOptions(address=scale.ray_address, cpus_per_task=scale.ray_cpus_per_task or 1.0,
                         retries=scale.retries, max_in_flight=scale.ray_tasks)
    try:
        return RayDispatcher(executor, options,
                             {planned.experiment.accelerator for planned in plan.experiments})
    except RayClusterError as error:
        raise UsageError(str(error)) from error


def main(argv: Optional[Sequence[str]] = None) -> int:
    """A sweep's command line (report commands are experiment_runner.py's)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    signals.install()
    try:
        # Inside the try: parsing imports lazily, and Ctrl-C can land there too.
        refused = undecodable_argument(argv)
        if refused:
            raise UsageError(refused)
        args = build_parser().parse_args(argv)
        console = logging.StreamHandler()
        console.setFormatter(PrintableFormatter("%(levelname)s: %(message)s"))
        logging.basicConfig(level=args.log_level.upper(), handlers=[console])
        if args.list_models:
            return list_models(args)
        if args.list_stacks:
            return list_stacks()
        return run_sweep(*sweep_flags(args), argv)
    except (UsageError, MatrixError, UnknownSuiteError, ResultsFileError, OutputPathError,
            SuiteUnavailableError, UnknownModelError) as error:
        print(f"experiment-runner: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as error:
        print(f"experiment-runner: error: {error.filename or 'output'}: "
              f"{error.strerror or error}", file=sys.stderr)
        return EXIT_OUTPUT_FAILED
    except KeyboardInterrupt as stop:
        print(f"\nexperiment-runner: {signals.describe(stop)}", file=sys.stderr)
        return signals.exit_status(stop)
