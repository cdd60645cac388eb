"""The command line's flags: the parser, its argument types, and what the parsed flags ask
for (the MatrixRequest, the RunSettings, the memory limit, the TorchBench folder).

A flag value the runner cannot use raises UsageError (argparse's own errors are one line too);
runner/app.py turns both into a message naming the flag and exit status 2.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable, Optional

import psutil

from core.config import RunSettings, knobs
from core.host.machine import cache_root
from core.fields import Field, FieldError, flagged_fields, none_if_none_string
from models import suite_names
from models.reduced import SMALL_MODELS_ENV, parse_reduced_setting
import observers
from runner.plan.matrix import MatrixRequest
from runner.plan.options import OutputOptions, ScaleOptions, SingleExperiment, WhatToRun

#: --start-method: children forked from a preloaded server (runner/run/process/forkserver_client.py),
#: or fresh interpreters.
START_METHODS = ("forkserver", "spawn")


LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


XRT_REMOVED = ("XRT was removed from PyTorch/XLA (2.1 was the last release with it); "
               "PJRT is its only runtime: use --xla=PJRT")


KEEP_ON_CUDA_REASON = (
    "--keep-model-data-on-cuda cannot apply: it hands CUDA tensors to PyTorch/XLA's dynamo "
    "bridge, which needs XLA:CUDA, removed from torch_xla after 2.8; on CUDA run "
    "--torch-xla2 (torchax on JAX's CUDA plugin) or --dynamo=inductor")


TORCHBENCH_DIR_ENV = "TORCHBENCH_DIR"


EXIT_BAD_INPUT = 2


#: A bare child (Python and torch, no model) holds about 700 MiB; a lower limit kills them all.
MIN_MEMORY_LIMIT_MB = 768


class UsageError(ValueError):
    """A flag value the runner cannot use."""


def number_parser(cast, kind: str, minimum: float, inclusive: bool = True,
                  maximum: Optional[float] = None):
    """An argparse type: a finite number of `cast`'s kind at least (or above) `minimum`
    and at most `maximum` (nan and inf are refused)."""

    def parse(text: str):
        try:
            value = cast(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind}")
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if value < minimum or (not inclusive and value == minimum):
            bound = "at least" if inclusive else "above"
            raise argparse.ArgumentTypeError(f"{text!r} must be {bound} {minimum:g}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"{text!r} must be at most {maximum}")
        return value

    return parse


def folder_parser(flag: str):
    """An argparse type: a folder, made absolute (the children run in folders of their
    own); a path that exists and is not a folder, or an empty one, is refused."""

    def parse(text: str) -> Optional[str]:
        if text == "None":
            return None
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{flag} needs a folder (or None), not {text!r}")
        path = Path(os.path.expanduser(text)).absolute()
        if path.exists() and not path.is_dir():
            raise argparse.ArgumentTypeError(f"{text!r} is not a folder")
        return str(path)

    return parse


#: The parsed value of a folder flag that was not given (its variable then counts).
_NOT_GIVEN = object()
#: The variable of --server-pool (runner/run/process/forkserver_pool.py).
SERVER_POOL_VARIABLE = "EXPERIMENT_RUNNER_SERVER_POOL"

positive_int = number_parser(int, "an integer", 1)
#: The most experiments one runner runs at a time: far more than any machine's cores or
#: GPUs, and refused before anything is allocated per job (--jobs=99999999999 ran out of
#: memory).
MAX_JOBS = 4096
job_count = number_parser(int, "an integer", 1, maximum=MAX_JOBS)


def per_gpu_count(text: str) -> Optional[int]:
    """--experiments-per-gpu: a positive integer, or auto (None: the runner chooses)."""
    return None if text.strip().lower() == "auto" else positive_int(text)
non_negative_int = number_parser(int, "an integer", 0)
positive_float = number_parser(float, "a number", 0, inclusive=False)
#: Seconds since the epoch, up to the end of year 9999 (what a date can show).
LAST_TIMESTAMP = 253402300799.0
timestamp_float = number_parser(float, "a number of seconds since the epoch", 0,
                                maximum=LAST_TIMESTAMP)


def xla_mode(text: str) -> Optional[str]:
    """--xla: XRT is refused with the reason (the table checks the rest)."""
    if text.strip().upper() == "XRT":
        raise argparse.ArgumentTypeError(f"--xla XRT: {XRT_REMOVED}")
    return text


def folded_choice(value: Any, choices: tuple) -> Any:
    """The one choice that `value` spells in another case (pjrt: PJRT, EVAL: eval), else
    `value` as it is (the field's check then refuses it, listing the choices)."""
    if not isinstance(value, str) or value in choices:
        return value
    same = [choice for choice in choices
            if isinstance(choice, str) and choice.casefold() == value.strip().casefold()]
    return same[0] if len(same) == 1 else value


def value_parser(spec: Field, parse: Optional[Callable[[str], Any]] = None) -> Callable[[str], Any]:
    """An argparse `type` for one value of the field's flag: text to the checked value (a
    choice in any case, where only one choice is spelled that way)."""
    def convert(text: str) -> Any:
        if parse is not None:
            value = parse(text)
        elif spec.kind is int:
            if spec.optional and none_if_none_string(text) is None:
                value = None
            else:
                try:
                    value = int(text)
                except ValueError:
                    raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        else:
            value = text
        if spec.choices is not None:
            value = folded_choice(value, spec.choices)
        try:
            return spec.check(value)  # argparse names the flag
        except FieldError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return convert


#: Field values whose text needs more than the table says (core.fields).
FLAG_PARSERS = {"xla": xla_mode}


def add_field_flags(group) -> None:
    """One flag per flagged field of the table (core.fields), its value checked there: a
    dimension is repeatable, a bool field is a switch."""
    for spec in flagged_fields():
        options: dict = {"dest": spec.name, "help": spec.help}
        if spec.kind is bool:
            options["action"] = "store_false" if spec.negated_switch else "store_true"
            options["default"] = spec.default
            options["help"] = spec.help
        else:
            options["type"] = value_parser(spec, FLAG_PARSERS.get(spec.name))
            if spec.choices is not None:
                options["metavar"] = "{" + ",".join(
                    "None" if choice is None else str(choice) for choice in spec.choices) + "}"
            if spec.dimension:
                options["action"] = "append"
                options["help"] = "(repeatable) " + spec.help
            else:
                options["default"] = spec.default
        group.add_argument(*spec.flags, **options)


def add_setting_flags(group) -> None:
    """One flag per how-to-measure setting (core.config.RunSettings: `knobs`), with the
    setting's type and default: a number at least its minimum, a choice, or a switch."""
    for spec, knob in knobs():
        options: dict = {"dest": knob.dest, "help": knob.help}
        if spec.type in (bool, "bool"):
            options.update(action="store_true", default=False)
        elif knob.choices is not None:
            options.update(choices=knob.choices, default=spec.default)
        elif knob.folder:
            options.update(type=folder_parser(knob.flag), default=_NOT_GIVEN)
        else:
            options.update(type=number_parser(int, "an integer", knob.minimum or 0),
                           default=spec.default)
        if knob.metavar:
            options["metavar"] = knob.metavar
        group.add_argument(knob.flag, **options)


class DefaultsOnceFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help that shows a flag's default once: not where its help already says it ("(default
    0: never)"), and not for a switch, whose default is not to be given (a negated switch's
    stored True read as "(default: True)", the opposite of what the flag does)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.nargs == 0 or "default" in text.lower():
            return text
        return super()._get_help_string(action)


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse whose errors are one line naming the flag and value (no usage block)."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="experiment-runner",
        description=(
            "Benchmark PyTorch models across eager, torch.compile, PyTorch/XLA and torchax. "
            "Flags marked (repeatable) form a dimension of the experiment matrix; a dimension "
            "left unset takes every value valid here. Subcommands: report, compare, score, bisect "
            "(run 'experiment-runner report --help')."
        ),
        formatter_class=DefaultsOnceFormatter,
    )
    what = parser.add_argument_group("what to run")
    what.add_argument("--suite-name", default="builtin",
                      help=f"model suite: {', '.join(suite_names())}")
    what.add_argument("--torchbench-dir",
                      help="TorchBench checkout for --suite-name=torchbench "
                           f"(default: ${TORCHBENCH_DIR_ENV} or an importable torchbenchmark)")
    add_field_flags(what)
    what.add_argument("--filter", "-k", action="append", default=[],
                      help="(repeatable) case-insensitive regex; run models matching any")
    what.add_argument("--exclude", "-x", action="append", default=[],
                      help="(repeatable) case-insensitive regex; skip models matching any")
    what.add_argument("--filter-by-tier", action="append", type=positive_int, default=[],
                      metavar="TIER", help="(repeatable) also run the models of this TorchBench "
                                           "tier (1-3, as PyTorch/XLA's runner defines them)")
    what.add_argument("--exclude-by-tier", action="append", type=positive_int, default=[],
                      metavar="TIER", help="(repeatable) skip the models of this TorchBench tier")
    what.add_argument("--total-partitions", type=positive_int, default=1,
                      help="cut the suite's model list into this many contiguous partitions "
                           "(as PyTorch/XLA's runner: the last one takes the remainder)")
    what.add_argument("--partition-id", type=non_negative_int, default=0,
                      help="which partition of the model list to run (0-based)")
    what.add_argument("--model-config", metavar="JSON",
                      help="with --experiment-config: run exactly this one experiment "
                           "(--dry-run prints both for every planned experiment)")
    what.add_argument("--experiment-config", metavar="JSON",
                      help="with --model-config: the configuration of the one experiment; "
                           "PyTorch/XLA's keys (accelerator, xla, dynamo, torch_xla2, test, ...) "
                           "or ours")
    what.add_argument("--small-models", action="store_true",
                      help="reduced models: fewer layers, smaller inputs, default batch sizes of "
                           "at most 4, each built and run in about a second on a CPU (a quick "
                           "try, tests, CI); recorded as the line's model.reduced. "
                           f"{SMALL_MODELS_ENV}=1 does the same")
    what.add_argument("--no-skip", action="store_true",
                      help="run models the suite marks as unable to run a test, instead of "
                           "recording them as skipped")
    what.add_argument("--keep-model-data-on-cuda", "--xla-take-cuda-model-and-data",
                      action="store_true",
                      help="PyTorch/XLA's flag; refused here: " + KEEP_ON_CUDA_REASON.split(": ", 1)[1])

    how = parser.add_argument_group("how to measure")
    add_setting_flags(how)

    observe = parser.add_argument_group(
        "observability",
        "what is collected besides the timings; files go to the experiment's folder under "
        "--output-dirname (docs/observability.md). A flag that does not apply to a stack adds "
        "a note to its line.")
    observers.add_flags(observe)

    output = parser.add_argument_group("output and control")
    output.add_argument("--output-dirname", default="./output", help="results folder")
    output.add_argument("--output-basename", default="results.jsonl", help="results file name")
    output.add_argument("--no-resume", action="store_true",
                        help="start a new results file; the old one is kept as a backup")
    output.add_argument("--dry-run", action="store_true",
                        help="print the experiments that would run, run nothing")
    output.add_argument("--list-models", action="store_true",
                        help="print the suite's models and default batch sizes")
    output.add_argument("--list-stacks", action="store_true",
                        help="print the registered stacks with their capabilities")
    output.add_argument("--subprocess-timeout", type=positive_float, default=1800.0,
                        help="seconds before a child and its whole process tree are killed")
    output.add_argument("--memory-limit-mb", type=positive_int,
                        help="kill a child whose process tree holds more resident memory "
                             "(default: 90%% of this machine's memory, shared by the --jobs)")
    output.add_argument("--print-subprocess", action="store_true",
                        help="show the children's output as they run")
    output.add_argument("--no-progress", action="store_true",
                        help="no progress: neither the bar nor the line per experiment")
    output.add_argument("--progress-bar", action="store_true",
                        help="PyTorch/XLA's switch for the progress bar, shown here by default "
                             "on a terminal; elsewhere (a log file, CI) a log line per finished "
                             "experiment instead (--no-progress hides both, even with this "
                             "flag)")
    output.add_argument("--timestamp", type=timestamp_float,
                        help="seconds since the epoch recorded as every line's timestamp "
                             "(default: when the sweep starts)")
    output.add_argument("--log-level", default="info", choices=LOG_LEVELS, help="logging level")
    output.add_argument("--no-probe-cache", action="store_true",
                        help="ask a probe child what this machine can run, even when an answer "
                             "younger than a day is cached for the same interpreter, packages "
                             "and devices")
    scale = parser.add_argument_group(
        "running side by side",
        "One experiment per slot at a time; each slot has its own share of the cores, and "
        "one GPU when the plan has CUDA experiments. Every line goes to the one results "
        "file; experiments start longest first by the durations already recorded. With "
        "--executor=ray, a Ray cluster runs them instead (docs/scaling.md).")
    scale.add_argument("--jobs", "-j", type=job_count, default=1,
                       help="experiments run at a time (with CUDA experiments: one per GPU, the "
                            "first N the runner sees)")
    scale.add_argument("--start-method", choices=START_METHODS, default=default_start_method(),
                       help="forkserver (default on Linux): children fork from a server that "
                            "imported the stack's libraries once; spawn: a fresh interpreter "
                            "per child")
    scale.add_argument("--server-pool", type=folder_parser("--server-pool"), default=_NOT_GIVEN,
                       metavar="DIR",
                       help="with forkserver: keep each fork server's preloaded libraries "
                            "alive in a template process after the run (its log and pid in "
                            "DIR), so that later runs fork their servers from it instead of "
                            "importing torch again; a template ends when unused for 10 "
                            "minutes or when a file it loaded changes. The figures are the "
                            "same (docs/running.md). Default: $" + SERVER_POOL_VARIABLE +
                            ", else the folder servers in the user's cache folder "
                            "(~/.cache/experiment-runner); None: servers of the run's own, "
                            "which end with it")
    scale.add_argument("--devices", type=device_list, default=[],
                       help="comma-separated CUDA devices (as CUDA_VISIBLE_DEVICES names them), "
                            "one job each")
    scale.add_argument("--experiments-per-gpu", type=per_gpu_count, default="auto", metavar="K",
                       help="CUDA experiments that share each GPU (of --devices or --jobs), each "
                            "on cores of its own: they take turns on the card, one compiling on "
                            "its cores while another times (docs/scaling.md). auto: 3 where every "
                            "experiment is a CUDA one of a stack that shares a GPU (eager, "
                            "dynamo) and each keeps 4 CPUs, fewer where the cores do not allow "
                            "it, else 1")
    scale.add_argument("--executor", choices=("local", "ray"), default="local",
                       help="local: on this machine, as --jobs/--devices say; ray: each "
                            "experiment a task of a Ray cluster, which places it (needs the "
                            "ray extra; docs/scaling.md)")
    scale.add_argument("--ray-address",
                       help="with --executor=ray: the cluster ray.init joins (auto, or the "
                            "head's HOST:PORT); default: start a Ray instance on this machine, "
                            "bound to 127.0.0.1")
    scale.add_argument("--ray-cpus-per-task", type=positive_float,
                       help="with --executor=ray: CPUs each experiment's task requests "
                            "(default 1; a CUDA task also takes 1 GPU, a TPU task 1 TPU)")
    scale.add_argument("--ray-tasks", type=positive_int,
                       help="with --executor=ray: experiments in flight at a time (default: "
                            "as many as the cluster's CPUs, or GPUs, hold)")
    scale.add_argument("--retries", type=non_negative_int, default=0,
                       help="with --executor=ray: times Ray runs an experiment again whose node "
                            "or worker was lost, before its line records the loss")
    return parser


def default_start_method() -> str:
    return "forkserver" if sys.platform.startswith("linux") else "spawn"


def device_list(text: str) -> list[str]:
    devices = [device.strip() for device in text.split(",")]
    if not text.strip() or any(not device for device in devices):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of devices (e.g. 0,1,2,3)")
    return devices


def reduced_models(args: Optional[argparse.Namespace] = None) -> bool:
    """--small-models, else EXPERIMENT_RUNNER_SMALL_MODELS, read once by the parent (children
    get it in their spec)."""
    try:
        from_environment = parse_reduced_setting(os.environ.get(SMALL_MODELS_ENV, ""))
    except ValueError as error:
        raise UsageError(f"{SMALL_MODELS_ENV}: {error}") from None
    return bool(getattr(args, "small_models", False)) or from_environment


def matrix_request(args: argparse.Namespace, torchbench: Optional[str] = None) -> MatrixRequest:
    """The matrix the flags ask for: each flagged field of the table (core.fields) is a
    dimension (its values, deduplicated; None when not given) or a value."""
    dimensions, values = {}, {}
    for spec in flagged_fields():
        given = getattr(args, spec.name)
        if spec.dimension:
            if given is not None:
                dimensions[spec.name] = tuple(dict.fromkeys(given))
        else:
            values[spec.name] = given
    return MatrixRequest(
        dimensions=dimensions,
        values=values,
        filters=tuple(args.filter),
        excludes=tuple(args.exclude),
        filter_tiers=tuple(args.filter_by_tier),
        exclude_tiers=tuple(args.exclude_by_tier),
        total_partitions=args.total_partitions,
        partition_id=args.partition_id,
        reduced=reduced_models(args),
        torchbench_dir=torchbench,
    )


def run_settings(args: argparse.Namespace) -> RunSettings:
    """The how-to-measure settings the flags ask for (`add_setting_flags`); a folder
    setting whose flag is not given takes its environment variable, else its default."""
    values = {}
    for spec, knob in knobs():
        given = getattr(args, knob.dest)
        if given is _NOT_GIVEN:
            given = _folder_from_environment(knob) or spec.default
        values[spec.name] = not given if knob.negated else given
    for spec, knob in knobs():
        if knob.implied_by is not None:
            values[spec.name] = values[spec.name] or values[knob.implied_by]
    return RunSettings(**values, observe=observers.options_from(args))


def _folder_from_environment(knob) -> Optional[str]:
    return _folder_from_variable(knob.environment) if knob.environment else None


def default_server_pool() -> str:
    """The server pool of runs that name none: the user's cache folder's (the templates of
    every run of one user and environment, ended 10 minutes after their last use)."""
    return str(cache_root() / "servers")


def _folder_from_variable(variable: str, default: Optional[str] = None) -> Optional[str]:
    """The folder a variable names (`default` where unset or empty, None where None);
    UsageError naming the variable where it is no folder."""
    text = os.environ.get(variable, "")
    if not text:
        return default
    try:
        return folder_parser(variable)(text)
    except argparse.ArgumentTypeError as error:
        raise UsageError(f"{variable}: {error}") from None


def default_memory_limit(jobs: int = 1) -> int:
    """90% of the machine, shared by the jobs that run at a time."""
    return int(psutil.virtual_memory().total * 0.9 / jobs)


def memory_limit_bytes(memory_limit_mb: Optional[int]) -> int:
    """--memory-limit-mb in bytes, 0 when not given (`default_memory_limit` over the
    sweep's slots); UsageError below what any child needs."""
    if not memory_limit_mb:
        return 0
    if memory_limit_mb < MIN_MEMORY_LIMIT_MB:
        raise UsageError(
            f"--memory-limit-mb {memory_limit_mb} is below the {MIN_MEMORY_LIMIT_MB} MiB "
            "a child needs (Python with torch alone holds about 700 MiB): every child would "
            "be killed")
    return memory_limit_mb * 2**20


def torchbench_dir(args: argparse.Namespace) -> Optional[str]:
    """--torchbench-dir, else $TORCHBENCH_DIR, resolved; None when neither is given."""
    given, source = args.torchbench_dir, "--torchbench-dir"
    if not given and os.environ.get(TORCHBENCH_DIR_ENV):
        given, source = os.environ[TORCHBENCH_DIR_ENV], TORCHBENCH_DIR_ENV
    if not given:
        return None
    path = Path(os.path.expanduser(given)).resolve()
    if not path.is_dir():
        raise UsageError(f"{source} {given!r} is not a folder")
    return str(path)


def what_to_run(args: argparse.Namespace) -> WhatToRun:
    """The suite and the matrix the flags ask for, or the one experiment they name."""
    if args.keep_model_data_on_cuda:
        raise UsageError(KEEP_ON_CUDA_REASON)
    single = None
    if args.model_config is not None or args.experiment_config is not None:
        if args.model_config is None or args.experiment_config is None:
            raise UsageError("--model-config and --experiment-config go together: they name "
                             "exactly one experiment")
        single = SingleExperiment(args.model_config, args.experiment_config)
    return WhatToRun(args.suite_name, matrix_request(args, torchbench_dir(args)), single,
                     no_skip=args.no_skip)


RAY_FLAGS = ("ray_address", "ray_cpus_per_task", "ray_tasks")


def flag_text(name: str, value) -> str:
    """How a flag was given, e.g. --ray-cpus-per-task=2."""
    shown = f"{value:g}" if isinstance(value, float) else value
    return f"--{name.replace('_', '-')}={shown}"


def check_executor_flags(args: argparse.Namespace) -> None:
    """--executor and the flags that go with it agree."""
    if args.executor == "local":
        given = [flag_text(name, getattr(args, name)) for name in RAY_FLAGS
                 if getattr(args, name) is not None]
        if args.retries:
            given.append(flag_text("retries", args.retries))
        if given:
            raise UsageError(f"{' '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to "
                             "--executor=ray only")
        return
    if args.devices or args.jobs != 1 or args.experiments_per_gpu not in (None, 1):
        flag = (f"--devices={','.join(args.devices)}" if args.devices else
                f"--jobs={args.jobs}" if args.jobs != 1 else
                f"--experiments-per-gpu={args.experiments_per_gpu}")
        raise UsageError(f"{flag} does not apply to --executor=ray: Ray places each "
                         "experiment on the cluster (--ray-tasks sets how many run at a time)")


def scale_options(args: argparse.Namespace) -> ScaleOptions:
    """How many experiments run at a time and where (--executor and the flags with it)."""
    check_executor_flags(args)
    pool = args.server_pool
    if pool is _NOT_GIVEN:
        pool = _folder_from_variable(SERVER_POOL_VARIABLE, default_server_pool())
    return ScaleOptions(jobs=args.jobs, devices=tuple(args.devices),
                        per_gpu=args.experiments_per_gpu, start_method=args.start_method,
                        server_pool=pool,
                        executor=args.executor, ray_address=args.ray_address,
                        ray_cpus_per_task=args.ray_cpus_per_task, ray_tasks=args.ray_tasks,
                        retries=args.retries)


def output_options(args: argparse.Namespace, scale: ScaleOptions) -> OutputOptions:
    return OutputOptions(
        dirname=args.output_dirname, basename=args.output_basename, resume=not args.no_resume,
        dry_run=args.dry_run, progress=not args.no_progress, timestamp=args.timestamp,
        log_level=args.log_level, probe_cache=not args.no_probe_cache,
        print_subprocess=args.print_subprocess, subprocess_timeout=args.subprocess_timeout,
        memory_limit_bytes=memory_limit_bytes(args.memory_limit_mb))


def sweep_flags(args: argparse.Namespace) -> tuple[WhatToRun, RunSettings, OutputOptions, ScaleOptions]:
    """Everything the parsed flags ask of a sweep, typed and checked (UsageError naming the
    flag otherwise); nothing after this reads the flags."""
    scale = scale_options(args)
    what = what_to_run(args)
    return what, run_settings(args), output_options(args, scale), scale
