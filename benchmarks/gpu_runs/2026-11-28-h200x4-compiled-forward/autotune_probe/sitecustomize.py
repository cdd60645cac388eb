"""A diagnostic for issue 21 (not part of the runner): with this folder on PYTHONPATH, every
Python process that loads inductor's Triton autotuner writes, for each kernel it tunes, one
line to stderr: the arguments the kernel writes to (and their bytes), and how much memory
inductor allows itself for copies of them (`max_memory_allocated - memory_allocated`); an
argument over that allowance is copied to the host and back around each timed call instead
of being cloned on the card (CachingAutotuner.copy_args_to_cpu_if_needed).

    AUTOTUNE-PROBE kernel=NAME budget=BYTES allocated=BYTES peak=BYTES mutated=NAME:BYTES,...
        to_cpu=NAME,... autocast=BOOL grad=BOOL gc_objects=N

(one line each), with the process's state around the tuning that could lengthen the host's
part of each timed call: whether autocast and grad mode are on, and the Python heap's size.
Each candidate's timing gets a line too (AUTOTUNE-PROBE-BENCH: its result, the wall time of
the whole timing, and how many times CUDA's caching allocator went to the driver for memory,
freed memory back, or retried meanwhile: a clone that cannot reuse a cached block pays
cudaMalloc and cudaFree inside every timed call).

Loaded lazily: the autotuner's module is patched right after it is first imported, so that
processes that never tune (pip, compile workers) are left alone."""

import gc
import importlib.abc
import importlib.machinery
import sys

TARGET = "torch._inductor.runtime.triton_heuristics"


def _patch(module):
    tuner = module.CachingAutotuner
    original = tuner.copy_args_to_cpu_if_needed

    def copy_args_to_cpu_if_needed(self, *args, **kwargs):
        import torch

        if not (self.optimize_mem and torch.cuda.is_available()):
            return original(self, *args, **kwargs)
        allocated = torch.cuda.memory_allocated()
        peak = torch.cuda.max_memory_allocated()
        import os

        if os.environ.get("AUTOTUNE_PROBE_CLONE_ON_CARD") == "1":
            copies = {}  # the test: every written argument cloned on the card, none to the host
        else:
            copies = original(self, *args, **kwargs)
        named = list(zip(self.fn.arg_names, args)) + list(kwargs.items())
        mutated = ",".join(f"{name}:{arg.untyped_storage().nbytes()}" for name, arg in named
                           if name in self.mutated_arg_names and isinstance(arg, torch.Tensor))
        kernel = self.inductor_meta.get("kernel_name", getattr(self.fn, "__name__", "?"))
        print(f"AUTOTUNE-PROBE kernel={kernel} budget={peak - allocated} allocated={allocated} "
              f"peak={peak} mutated={mutated or '-'} to_cpu={','.join(copies) or '-'} "
              f"autocast={torch.is_autocast_enabled('cuda')} grad={torch.is_grad_enabled()} "
              f"gc_objects={len(gc.get_objects())}", file=sys.stderr, flush=True)
        return copies

    bench = tuner.bench

    def timed_bench(self, launcher, *args, **kwargs):
        import time

        import torch

        if not torch.cuda.is_available():
            return bench(self, launcher, *args, **kwargs)
        before = torch.cuda.memory_stats()
        started = time.perf_counter()
        result = bench(self, launcher, *args, **kwargs)
        wall = time.perf_counter() - started
        after = torch.cuda.memory_stats()
        moved = {key: after.get(key, 0) - before.get(key, 0)
                 for key in ("num_device_alloc", "num_device_free", "num_alloc_retries",
                             "allocation.all.allocated", "num_sync_all_streams")}
        kernel = self.inductor_meta.get("kernel_name", getattr(self.fn, "__name__", "?"))
        print(f"AUTOTUNE-PROBE-BENCH kernel={kernel} config={launcher.config} ms={result} "
              f"wall_s={wall:.4f} " + " ".join(f"{key}={value}" for key, value in moved.items()),
              file=sys.stderr, flush=True)
        return result

    tuner.copy_args_to_cpu_if_needed = copy_args_to_cpu_if_needed
    tuner.bench = timed_bench
    tuner._autotune_probe = True


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _PatchAfterImport())
