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
from core.fields import ACCELERATORS
from core.results_file import ResultsFile, ResultsFileError, ResultsRead
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
from runner.plan.output import OutputPathError, output_paths, prepare_output
from runner.plan.parser import (
    EXIT_BAD_INPUT,
    KEEP_ON_CUDA_REASON,
    UsageError,
    build_parser,
    matrix_request,
    memory_limit_bytes,
    reduced_models,
    run_settings,
    torchbench_dir,
)
from runner.plan.probe import probe_host
from runner.plan.resume import recorded_fingerprints
from runner.plan.slots import Slot, SlotError, plan_slots, visible_gpus
from runner.run import signals
from runner.run.claims import Claims, RunnerIdentity
from runner.run.dispatch import Dispatcher, LocalDispatcher
from runner.run.executor import ExecutorOptions, ExperimentExecutor, SweepInfo
from runner.run.guard import ProcessGuard
from runner.run.scratch import ScratchRoot
from runner.run.sweep import SweepReport, expected_durations, format_summary, run_plan

log = logging.getLogger("experiment_runner")

REPORT_COMMANDS = ("report", "compare", "score")
#: The sweep stopped because its output could not be written (a full disk): sysexits' EX_IOERR.
EXIT_OUTPUT_FAILED = 74


def print_plan(plan: Plan) -> None:
    """Each experiment, then the flags that run exactly it (to copy and paste)."""
    for planned in plan.experiments:
        model, experiment = config_json(planned)
        print(f"{planned.model.model_name}: {planned.experiment.describe()} [{planned.label}]")
        print(f"  --model-config={shlex.quote(model)} --experiment-config={shlex.quote(experiment)}")
    print(f"{len(plan.experiments)} experiment(s) would run; "
          f"{len(plan.already_recorded)} already recorded")


def report_dropped(plan: Plan) -> None:
    if not plan.dropped:
        return
    log.info("left out %d configuration(s) (for every model):", len(plan.dropped))
    for line in plan.dropped_summary():
        log.info("  %s", line)
    for dropped in plan.dropped:
        log.debug("dropped %s: %s", dropped.experiment.describe(), dropped.reason)


def list_models(args: argparse.Namespace) -> int:
    suite = get_suite(args.suite_name, reduced=reduced_models(), torchbench_dir=torchbench_dir(args))
    for name in suite.model_names():
        print(f"{name}\t{suite.default_batch_size(name)}")
    return 0


def list_stacks() -> int:
    for stack in backends.all_stacks():
        caps = stack.capabilities
        print(f"{stack.name}: features {', '.join(sorted(caps.features)) or '-'}; "
              f"IR formats {', '.join(caps.ir_formats) or '-'}; "
              f"shares a process with eager: {'yes' if caps.shares_process_with_eager else 'no'}; "
              f"synchronization: {caps.synchronization}")
    return 0


def run_sweep(args: argparse.Namespace, argv: Sequence[str]) -> int:
    started = args.timestamp if args.timestamp is not None else time.time()
    check_executor_flags(args)
    if args.keep_model_data_on_cuda:
        raise UsageError(KEEP_ON_CUDA_REASON)
    single = args.model_config is not None or args.experiment_config is not None
    if single and (args.model_config is None or args.experiment_config is None):
        raise UsageError("--model-config and --experiment-config go together: they name "
                         "exactly one experiment")
    tb_dir = torchbench_dir(args)
    request = matrix_request(args, tb_dir)
    suite = get_suite(args.suite_name, reduced=request.reduced, torchbench_dir=tb_dir)
    paths = output_paths(args.output_dirname, args.output_basename)
    results_path = paths.results
    jobs = len(args.devices) or args.jobs
    memory_limit = memory_limit_bytes(args, jobs)
    if not single:  # bad regexes and tiers fail before the probe
        select_models(suite, request.filters, request.excludes, request.filter_tiers,
                      request.exclude_tiers)
    if not args.dry_run:
        prepare_output(paths, args.output_dirname)
    host = probe_host(use_cache=not args.no_probe_cache)
    if host.torch_error:
        log.warning("PyTorch is not usable here: %s", host.torch_error)
    settings = run_settings(args)
    results = ResultsFile(results_path)
    known = ResultsRead() if args.no_resume or single else results.read()
    if single:
        plan = single_plan(suite, args.model_config, args.experiment_config, request, host)
    else:
        plan = build_plan(suite, request, host, recorded_fingerprints(known.lines, settings))
    report_dropped(plan)
    log.info("Number of selected experiment configs: %d", plan.configuration_count)
    log.info("Number of selected model configs: %d", len(plan.model_names))
    if not plan.model_names:
        print(f"partition {request.partition_id} of {request.total_partitions} holds no model "
              "that the filters select")
    slots = sweep_slots(args, plan, host)
    if args.dry_run:
        print_plan(plan)
        return 0
    if args.no_resume:
        backup = results.backup()
        if backup:
            print(f"previous results kept in {backup}")
    if plan.already_recorded:
        print(f"{len(plan.already_recorded)} experiment(s) already recorded in {results_path}; "
              "skipping them (--no-resume starts over)")
    executor = ExperimentExecutor(
        ExecutorOptions(
            output_dir=Path(args.output_dirname),
            timeout_seconds=args.subprocess_timeout,
            memory_limit_bytes=memory_limit,
            print_subprocess=args.print_subprocess,
            log_level=args.log_level.upper(),
            start_method=args.start_method,
            host_variables=tuple(sorted(host.child_environment.items())),
            sweep_preloads=frozenset(
                backends.get_stack(planned.experiment.stack).preload_for(planned.experiment)
                for planned in plan.experiments),
        ),
        settings,
        SweepInfo(run_id=uuid.uuid4().hex[:12], command=shlex.join(["experiment-runner", *argv]),
                  timestamp=started,
                  accelerator_models={name: host.accelerator_model(name) for name in ACCELERATORS}),
        guard=ProcessGuard(),
        scratch=ScratchRoot(),
    )
    claims = Claims(results, settings, RunnerIdentity.of_this_process(executor.sweep.run_id),
                    known=known, resume=not single)
    report = SweepReport()
    if len(slots) > 1:
        log.info("running %d experiments at a time: %s", len(slots),
                 "; ".join(slot.describe() for slot in slots))
    try:
        executor.start()
        executor.prestart_servers(plan.experiments)
        run_plan(plan, suite, sweep_dispatcher(args, executor, slots, plan), claims, report,
                 show_progress=not args.no_progress, no_skip=args.no_skip,
                 durations=expected_durations(known.lines),
                 remeasure_slow=settings.remeasure_slow)
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
    if report.lines:
        print(format_summary(report.lines))
    failed = sum(1 for line in report.lines if line["status"] == "failed")
    print(f"{len(report.lines)} experiment(s) recorded in {results_path}"
          + (f"; {failed} failed" if failed else "")
          + (f"; {report.recorded_elsewhere} recorded by other runners"
             if report.recorded_elsewhere else ""))
    return 0


def sweep_slots(args: argparse.Namespace, plan: Plan, host) -> list[Slot]:
    """The slots --jobs and --devices ask for, checked against this machine."""
    uses_cuda = plan.asks_for("cuda")
    try:
        return plan_slots(args.jobs, args.devices, uses_cuda,
                          visible_gpus(len(host.cuda_device_names)),
                          sorted(os.sched_getaffinity(0)))
    except SlotError as error:
        raise UsageError(str(error)) from error


RAY_FLAGS = ("ray_address", "ray_cpus_per_task", "ray_tasks")


def flag_text(name: str, value) -> str:
    """How a flag was given, e.g. --ray-cpus-per-task=2."""
    shown = f"{value:g}" if isinstance(value, float) else value
    return f"--{name.replace('_', '-')}={shown}"


def check_executor_flags(args: argparse.Namespace) -> None:
    """--executor and the flags that go with it agree, and Ray is there when asked for."""
    if args.executor == "local":
        given = [flag_text(name, getattr(args, name)) for name in RAY_FLAGS
                 if getattr(args, name) is not None]
        if args.retries:
            given.append(flag_text("retries", args.retries))
        if given:
            raise UsageError(f"{' '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to "
                             "--executor=ray only")
        return
    if args.devices or args.jobs != 1:
        flag = f"--devices={','.join(args.devices)}" if args.devices else f"--jobs={args.jobs}"
        raise UsageError(f"{flag} does not apply to --executor=ray: Ray places each "
                         "experiment on the cluster (--ray-tasks sets how many run at a time)")
    from runner.run.ray_dispatch import RayUnavailableError, import_ray

    try:
        import_ray(args.ray_address)
    except RayUnavailableError as error:
        raise UsageError(str(error)) from None


def sweep_dispatcher(args: argparse.Namespace, executor: ExperimentExecutor,
                     slots: Sequence[Slot], plan: Plan) -> Dispatcher:
    """Where the experiments run: this machine's slots, or a Ray cluster."""
    if args.executor != "ray":
        return LocalDispatcher(executor, slots)
    from runner.run.ray_dispatch import RayClusterError, RayDispatcher, RayOptions

    options = RayOptions(address=args.ray_address, cpus_per_task=args.ray_cpus_per_task or 1.0,
                         retries=args.retries, max_in_flight=args.ray_tasks)
    try:
        return RayDispatcher(executor, options,
                             {planned.experiment.accelerator for planned in plan.experiments})
    except RayClusterError as error:
        raise UsageError(str(error)) from error


def run_report_command(argv: Sequence[str]) -> int:
    try:
        from reports import cli as reports_cli
    except ImportError:
        print(f"experiment-runner {argv[0]}: reports are not available in this version",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    return reports_cli.main(list(argv))


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in REPORT_COMMANDS:
        return run_report_command(argv)
    signals.install()
    try:
        # Inside the try: parsing imports lazily, and Ctrl-C can land there too.
        args = build_parser().parse_args(argv)
        logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s: %(message)s")
        if args.list_models:
            return list_models(args)
        if args.list_stacks:
            return list_stacks()
        return run_sweep(args, argv)
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
