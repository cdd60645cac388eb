"""Where the points measured at once run: with `--jobs K` on a host of several GPUs, each of
the K concurrent sweeps gets a GPU of its own (the i-th of a round the i-th GPU, round robin)
and an equal, disjoint share of the cores, as the runner's own slots get them
(runner/plan/slots.py). With one GPU or none the sweeps keep today's view: the runner's
cores and GPUs, taking turns on the card through its gate."""

from __future__ import annotations

import os
from typing import Callable, Mapping, Optional, Sequence

from bisection.driver import BisectError
from runner.plan.probe import probe_host
from runner.plan.slots import CUDA_VISIBLE_DEVICES, Slot, SlotError, split_cores, visible_gpus


def gpu_count_from_probe() -> int:
    """The GPUs this machine's runner sees, as the probe answers (cached for a day)."""
    return len(probe_host(with_compiler_checks=False).cuda_device_names)


def sweep_flag(sweep_args: Sequence[str], flag: str) -> Optional[str]:
    """The value a sweep flag is given (`--flag=V` or `--flag V`; the last one wins), None
    where it is not given."""
    value = None
    for index, arg in enumerate(sweep_args):
        if arg == flag:
            value = sweep_args[index + 1] if index + 1 < len(sweep_args) else ""
        elif arg.startswith(flag + "="):
            value = arg[len(flag) + 1:]
    return value


def point_gpus(devices: Sequence[str], environment: Mapping[str, str],
               gpu_count: Callable[[], int]) -> list[str]:
    """The GPUs the points spread over: --devices, else those CUDA_VISIBLE_DEVICES lists, else
    as many as the probe finds (the runner's view, visible_gpus)."""
    if devices:
        return list(devices)
    if CUDA_VISIBLE_DEVICES in environment:
        return visible_gpus(0, dict(environment))
    count = gpu_count()
    return visible_gpus(count, dict(environment)) if count else []


def equal_shares(cores: Sequence[int], parts: int) -> list[tuple[int, ...]]:
    """`parts` disjoint shares of `cores` (split_cores: whole physical cores where it can),
    each cut to the size of the smallest: a point's figure must not depend on the share it
    drew, as it would where one sweep's children have a thread more than another's."""
    try:
        shares = split_cores(cores, parts)
    except SlotError as error:
        raise BisectError(f"bisect {error}") from None
    size = min(len(share) for share in shares)
    return [share[:size] for share in shares]


def point_slots(jobs: int, devices: Sequence[str], sweep_args: Sequence[str],
                environment: Optional[Mapping[str, str]] = None,
                cores: Optional[Sequence[int]] = None,
                gpu_count: Callable[[], int] = gpu_count_from_probe) -> list[Slot]:
    """The slots of the points measured at once, slot i for the i-th point of a round; an
    empty list keeps today's sweeps (the runner's own view of cores and GPUs).

    With K = `jobs` of at least 2 and n of at least 2 GPUs, slot i has GPU i mod n and the
    i-th of K equal shares of the cores. --devices names the GPUs (one named GPU is given to
    every sweep, which take turns on it). A sweep run by Ray (--executor=ray after --) is
    placed by Ray and left alone.
    """
    environment = os.environ if environment is None else environment
    if sweep_flag(sweep_args, "--executor") == "ray":
        if devices:
            raise BisectError(f"--devices={','.join(devices)} does not apply to sweeps run "
                              "with --executor=ray: Ray places each experiment on the cluster")
        return []
    slots = _slots(jobs, devices, environment, cores, gpu_count)
    if slots and sweep_flag(sweep_args, "--devices") is not None:
        raise BisectError("the sweep flag --devices and bisect's own placement of the points "
                          "measured at once disagree: give bisect --devices (before --) to "
                          "name the GPUs the points spread over")
    return slots


def _slots(jobs: int, devices: Sequence[str], environment: Mapping[str, str],
           cores: Optional[Sequence[int]], gpu_count: Callable[[], int]) -> list[Slot]:
    gpus = point_gpus(devices, environment, gpu_count) if jobs > 1 or devices else []
    if len(gpus) < 2 or jobs < 2:
        if not devices:
            return []
        return [Slot(index, (), gpus[0], shares_device=jobs > 1) for index in range(jobs)]
    cores = sorted(os.sched_getaffinity(0)) if cores is None else cores
    shares = equal_shares(cores, jobs)
    # GPU g is shared where another slot has it too: where g + n < K.
    return [Slot(index, share, gpus[index % len(gpus)],
                 shares_device=index % len(gpus) + len(gpus) < jobs)
            for index, share in enumerate(shares)]
