"""Where experiments run side by side: one slot per job, each with its own cores and GPU.

`--jobs N` runs N experiments at a time; `--devices A,B,...` runs one per named GPU, and
`--experiments-per-gpu K` K per GPU (by default, `auto`: up to AUTO_PER_GPU where every
experiment of the sweep may share a GPU, see `auto_per_gpu`). Each slot gets a disjoint
share of the runner's cores
(the children are pinned to it, so two CPU experiments never compete for a core) and, where
GPUs are used, one GPU that its children see through CUDA_VISIBLE_DEVICES: alone, or with
the children of the other K - 1 slots of that GPU, taking turns on the card through its
gate (child/device_gate.py), so that one compiles on its cores while another times. Shares are made of whole physical cores where there
are enough of them: logical CPUs that are SMT siblings (two hardware threads of one core)
go to the same share, so that one job's compiling never slows another's timing through a
shared core.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from core.host.cpus import cpu_list, physical_cores, thread_siblings

CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
#: The experiments `--experiments-per-gpu=auto` shares a GPU among, at most (the K whose
#: figures and cost docs/scaling.md gives).
AUTO_PER_GPU = 3
#: ... while each of them keeps at least this many logical CPUs of its own.
MIN_CPUS_PER_SHARED_SLOT = 4


class SlotError(ValueError):
    """--jobs or --devices asks for what this machine does not have."""


@dataclass(frozen=True)
class Slot:
    """One place an experiment runs: its cores, and the GPU its children see (None: the
    runner's own view)."""

    index: int
    cpu_set: tuple[int, ...] = ()
    cuda_device: Optional[str] = None
    #: Whether other slots' children share this slot's GPU (its children then take turns).
    shares_device: bool = False

    def environment(self) -> dict[str, str]:
        """What a child's environment gets for this slot."""
        return {} if self.cuda_device is None else {CUDA_VISIBLE_DEVICES: self.cuda_device}

    def describe(self) -> str:
        if not self.cpu_set:
            cores = "all cores"
        elif len(self.cpu_set) == 1:
            cores = f"core {self.cpu_set[0]}"
        else:
            cores = f"cores {cpu_list(self.cpu_set)}"
        shared = " (shared, in turns)" if self.shares_device else ""
        return cores + (f", GPU {self.cuda_device}{shared}" if self.cuda_device is not None else "")


def visible_gpus(gpu_count: int, environment: Optional[dict[str, str]] = None) -> list[str]:
    """The runner's GPUs as CUDA_VISIBLE_DEVICES names them (its own list when it has one)."""
    environment = os.environ if environment is None else environment
    listed = environment.get(CUDA_VISIBLE_DEVICES)
    if listed is not None and listed.strip():
        names = [name.strip() for name in listed.split(",") if name.strip()]
        return names[:gpu_count] if gpu_count else names
    return [str(index) for index in range(gpu_count)]


def split_cores(cores: Sequence[int], parts: int,
                siblings: Callable[[int], Sequence[int]] = thread_siblings,
                ) -> list[tuple[int, ...]]:
    """`parts` disjoint, nearly equal shares of `cores`: whole physical cores in order where
    there are at least `parts` of them, else contiguous runs of logical CPUs."""
    cores = sorted(cores)
    if parts > len(cores):
        raise SlotError(f"--jobs={parts} needs at least {parts} cores to pin each job to its own; "
                        f"this runner has {len(cores)} ({_cores_text(cores)})")
    groups = physical_cores(cores, siblings)
    if len(groups) < parts:
        groups = [(core,) for core in cores]
    size, extra = divmod(len(groups), parts)
    shares, start = [], 0
    for part in range(parts):
        stop = start + size + (1 if part < extra else 0)
        shares.append(tuple(sorted(core for group in groups[start:stop] for core in group)))
        start = stop
    return shares


def auto_per_gpu(gpu_count: int, cpu_count: int, shareable: bool,
                 experiments: Optional[int] = None) -> int:
    """`--experiments-per-gpu=auto`: where the sweep's experiments may share a GPU
    (`shareable`: all on CUDA, of stacks that share one), the most experiments a GPU, up to
    AUTO_PER_GPU, that leave each at least MIN_CPUS_PER_SHARED_SLOT logical CPUs of the
    `cpu_count`, and no more than the sweep's `experiments` need (a sweep of one experiment
    keeps all the cores); else 1."""
    if not shareable or gpu_count < 1:
        return 1
    most = AUTO_PER_GPU if experiments is None else min(AUTO_PER_GPU, math.ceil(experiments / gpu_count))
    for per_gpu in range(most, 1, -1):
        if cpu_count // (gpu_count * per_gpu) >= MIN_CPUS_PER_SHARED_SLOT:
            return per_gpu
    return 1


def plan_slots(jobs: int, devices: Sequence[str], uses_cuda: bool, gpus: Sequence[str],
               cores: Sequence[int], per_gpu: Optional[int] = 1,
               shareable: bool = False, experiments: Optional[int] = None) -> list[Slot]:
    """The slots of a sweep.

    One job (the default) keeps today's behaviour: all of the runner's cores, its own view of
    the GPUs. With several, each slot gets its share of the cores and, when the plan has
    CUDA experiments, one GPU: those named by --devices, else the first `jobs` GPUs. With
    `per_gpu` K above 1, each of those GPUs (the first one with one job) gets K slots of
    their own cores that share it, the GPUs' first slots first, so that a sweep of few
    experiments spreads over the GPUs. `per_gpu` None is `auto_per_gpu`'s choice, with
    `shareable` saying whether the sweep's `experiments` may share a GPU.
    """
    chosen = _slot_gpus(jobs, devices, uses_cuda, gpus)
    if per_gpu is None:
        per_gpu = auto_per_gpu(len(_gpus_to_share(chosen, gpus)), len(cores),
                               shareable and uses_cuda, experiments)
    if per_gpu > 1:
        return _shared_gpu_slots(chosen, uses_cuda, gpus, cores, per_gpu)
    if len(chosen) == 1:
        return [Slot(0, (), chosen[0])]
    return [Slot(index, share, device)
            for index, (share, device) in enumerate(zip(split_cores(cores, len(chosen)), chosen))]


def _slot_gpus(jobs: int, devices: Sequence[str], uses_cuda: bool,
               gpus: Sequence[str]) -> list[Optional[str]]:
    """The GPU of each job (None: the runner's own view), as --jobs and --devices ask."""
    if devices:
        if not uses_cuda:
            raise SlotError(f"--devices={','.join(devices)} names CUDA devices, and this sweep "
                            "runs no CUDA experiment: leave it out, or give --jobs to run "
                            "CPU experiments side by side")
        if jobs not in (1, len(devices)):
            raise SlotError(f"--jobs={jobs} and --devices={','.join(devices)} disagree: "
                            "--devices runs one job per device")
        if len(set(devices)) != len(devices):
            raise SlotError(f"--devices={','.join(devices)} names a device twice")
        return list(devices)
    if jobs > 1 and uses_cuda:
        if jobs > len(gpus):
            raise SlotError(f"--jobs={jobs} runs one CUDA experiment per GPU, and this runner "
                            f"sees {len(gpus)} GPU(s)" + (f" ({','.join(gpus)})" if gpus else ""))
        return list(gpus[:jobs])
    return [None] * jobs


def _shared_gpu_slots(chosen: list[Optional[str]], uses_cuda: bool, gpus: Sequence[str],
                      cores: Sequence[int], per_gpu: int) -> list[Slot]:
    if not uses_cuda:
        raise SlotError(f"--experiments-per-gpu={per_gpu} shares GPUs, and this sweep runs no "
                        "CUDA experiment: leave it out, or give --jobs to run CPU experiments "
                        "side by side")
    chosen = _gpus_to_share(chosen, gpus)
    if not chosen:
        raise SlotError(f"--experiments-per-gpu={per_gpu} shares GPUs, and this runner sees "
                        "none")
    count = len(chosen) * per_gpu
    if count > len(cores):
        raise SlotError(f"--experiments-per-gpu={per_gpu} on {len(chosen)} GPU(s) runs {count} "
                        f"experiments at a time, each on cores of its own; this runner has "
                        f"{len(cores)} ({_cores_text(sorted(cores))})")
    return [Slot(index, share, chosen[index % len(chosen)], shares_device=True)
            for index, share in enumerate(split_cores(cores, count))]


def _gpus_to_share(chosen: list[Optional[str]], gpus: Sequence[str]) -> list[Optional[str]]:
    """The GPUs whose slots share them: those chosen, or the runner's first where one job
    has its own view of them (none where it sees none)."""
    return list(gpus[:1]) if chosen == [None] else chosen


def _cores_text(cores: Sequence[int]) -> str:
    return ",".join(str(core) for core in cores) or "none"
