"""The numeric and runtime settings in force while an experiment times (child side).

`settings_snapshot` reads, without changing anything, every switch of torch that changes
what the timed iterations compute or how fast: TF32 and the float32 matmul precision in both
of torch's spellings, cuDNN's switches, SDPA's backends and reduced-precision flags, the
grad mode and autocast the model's forward runs under, the inductor, dynamo and functorch
settings that differ from their defaults (cudagraphs included), the CUDA allocator's
configuration, deterministic algorithms and the threads. Each reading is probed: a switch the
installed torch lacks is left out, one that cannot be read is recorded as its error, and a
snapshot never raises. The results line keeps it as `environment.torch_settings`
(docs/settings.md); benchmarks/fidelity/settings_parity.py takes the same snapshot inside PyTorch's
harness. It imports nothing that is not loaded already, besides torch.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from typing import Any, Callable, ContextManager, Mapping, Optional

#: Config modules read where they are loaded (importing one would change the process).
CONFIG_MODULES = (("inductor", "torch._inductor.config"), ("dynamo", "torch._dynamo.config"),
                  ("functorch", "torch._functorch.config"))
#: Environment variables that configure the allocator, the threads or compilation.
RECORDED_VARIABLES = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF",
                      "PYTORCH_NO_CUDA_MEMORY_CACHING", "CUDA_LAUNCH_BLOCKING",
                      "CUBLAS_WORKSPACE_CONFIG", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                      "TORCHINDUCTOR_COMPILE_THREADS", "TORCHINDUCTOR_MAX_AUTOTUNE",
                      "TORCH_CUDNN_V8_API_DISABLED", "NVIDIA_TF32_OVERRIDE")
#: Where a line ran rather than a setting: recorded, not compared between tools or files.
PLACEMENT_KEYS = frozenset({"cpu_affinity"})


def settings_snapshot(device_type: str = "cpu",
                      iteration_context: Optional[Callable[[], ContextManager[Any]]] = None,
                      compile_options: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """The settings in force now, as one flat dict of JSON values.

    `iteration_context` makes the context the timed iteration enters around the model's
    forward (its grad mode and autocast); the grad mode and autocast are read inside it, as
    the model's operators see them. `compile_options` are the inductor options the
    experiment's torch.compile applies over inductor's global settings while it compiles
    (they are merged into the `inductor.` entries)."""
    import torch

    found: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy TF32 getters warn on newer torch
        _numerics(torch, found)
        _sdpa(torch, found)
        _inside_iteration(torch, device_type, iteration_context, found)
        _threads(torch, found)
        _allocator(torch, found)
        for prefix, module_name in CONFIG_MODULES:
            module = sys.modules.get(module_name)
            if module is None:
                found[f"{prefix}.loaded"] = False
                continue
            options = compile_options if prefix == "inductor" else None
            for name, value in sorted(changed_config(module, options).items()):
                found[f"{prefix}.{name}"] = value
            if prefix == "inductor":
                _read(found, "inductor_compile_threads", lambda: module.compile_threads)
        _other_stacks(found)
    return found


def _read(found: dict[str, Any], key: str, read: Callable[[], Any]) -> None:
    """found[key] = read(), as a JSON value; left out where torch lacks it (AttributeError),
    recorded as the error where it cannot be read."""
    try:
        found[key] = jsonable(read())
    except AttributeError:
        pass
    except Exception as error:  # a snapshot never fails the line
        found[key] = f"unreadable: {type(error).__name__}: {error}"[:200]


def _numerics(torch, found: dict[str, Any]) -> None:
    backends = torch.backends
    cuda, cudnn = backends.cuda, backends.cudnn
    _read(found, "float32_matmul_precision", torch.get_float32_matmul_precision)
    _read(found, "fp32_precision", lambda: backends.fp32_precision)
    _read(found, "cuda_matmul_allow_tf32", lambda: cuda.matmul.allow_tf32)
    _read(found, "cuda.matmul.fp32_precision", lambda: cuda.matmul.fp32_precision)
    _read(found, "cuda.matmul.allow_fp16_reduced_precision_reduction",
          lambda: cuda.matmul.allow_fp16_reduced_precision_reduction)
    _read(found, "cuda.matmul.allow_bf16_reduced_precision_reduction",
          lambda: cuda.matmul.allow_bf16_reduced_precision_reduction)
    _read(found, "cuda.matmul.allow_fp16_accumulation",
          lambda: cuda.matmul.allow_fp16_accumulation)
    _read(found, "cuda.preferred_blas_library", lambda: str(cuda.preferred_blas_library()))
    _read(found, "cudnn_allow_tf32", lambda: cudnn.allow_tf32)
    _read(found, "cudnn.fp32_precision", lambda: cudnn.fp32_precision)
    _read(found, "cudnn.conv.fp32_precision", lambda: cudnn.conv.fp32_precision)
    _read(found, "cudnn.rnn.fp32_precision", lambda: cudnn.rnn.fp32_precision)
    _read(found, "cudnn.enabled", lambda: cudnn.enabled)
    _read(found, "cudnn.benchmark", lambda: cudnn.benchmark)
    _read(found, "cudnn.benchmark_limit", lambda: cudnn.benchmark_limit)
    _read(found, "cudnn.deterministic", lambda: cudnn.deterministic)
    _read(found, "mkldnn.matmul.fp32_precision", lambda: backends.mkldnn.matmul.fp32_precision)
    _read(found, "mkldnn.conv.fp32_precision", lambda: backends.mkldnn.conv.fp32_precision)
    _read(found, "deterministic_algorithms", torch.are_deterministic_algorithms_enabled)
    _read(found, "deterministic_algorithms_warn_only",
          torch.is_deterministic_algorithms_warn_only_enabled)


def _sdpa(torch, found: dict[str, Any]) -> None:
    cuda = torch.backends.cuda
    _read(found, "fp16_bf16_reduction_math_sdp", cuda.fp16_bf16_reduction_math_sdp_allowed)
    for name in ("flash", "mem_efficient", "math", "cudnn"):
        _read(found, f"sdpa.{name}", getattr(cuda, f"{name}_sdp_enabled"))


def _inside_iteration(torch, device_type: str,
                      iteration_context: Optional[Callable[[], ContextManager[Any]]],
                      found: dict[str, Any]) -> None:
    try:
        context = iteration_context() if iteration_context is not None \
            else contextlib.nullcontext()
        with context:
            _read(found, "grad_enabled", torch.is_grad_enabled)
            _read(found, "inference_mode", torch.is_inference_mode_enabled)
            for device in dict.fromkeys((device_type, "cpu")):
                enabled = torch.is_autocast_enabled(device)
                found[f"autocast.{device}.enabled"] = enabled
                if enabled:
                    _read(found, f"autocast.{device}.dtype",
                          lambda device=device: torch.get_autocast_dtype(device))
            _read(found, "autocast.cache_enabled", torch.is_autocast_cache_enabled)
    except Exception as error:  # a snapshot never fails the line
        found["autocast"] = f"unreadable: {type(error).__name__}: {error}"[:200]


def _threads(torch, found: dict[str, Any]) -> None:
    _read(found, "num_threads", torch.get_num_threads)
    _read(found, "num_interop_threads", torch.get_num_interop_threads)
    _read(found, "cpu_affinity", lambda: sorted(os.sched_getaffinity(0)))


def _allocator(torch, found: dict[str, Any]) -> None:
    for name in RECORDED_VARIABLES:
        if name in os.environ:
            found[f"env.{name}"] = os.environ[name]
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        _read(found, "cuda.allocator_backend", torch.cuda.get_allocator_backend)


def _other_stacks(found: dict[str, Any]) -> None:
    if sys.modules.get("torch_xla") is not None:
        def xla_precision() -> Any:
            import torch_xla.backends

            return torch_xla.backends.get_mat_mul_precision()

        _read(found, "xla_matmul_precision", xla_precision)
    if sys.modules.get("jax") is not None:
        _read(found, "jax_default_matmul_precision",
              lambda: sys.modules["jax"].config.jax_default_matmul_precision)


def changed_config(module: Any, options: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """The public entries of a torch config module (torch.utils._config_module) whose value
    differs from the default it declares, with `options` (a torch.compile's) applied over
    them; each value as JSON. Where an entry declares no default, the module's own default
    tracking (`_is_default`) decides. Private entries (a leading underscore) are left out:
    reading one of inductor's (`_fuse_ddp_communication_passes`) costs 8 ms."""
    entries = getattr(module, "_config", None)
    current: dict[str, Any] = {}
    if isinstance(entries, dict):
        for name, entry in entries.items():
            if name.startswith("_") or getattr(entry, "alias", None) is not None:
                continue
            try:
                value = getattr(module, name)
                default = getattr(entry, "default", None)
                differs = (value != default if _declared(default)
                           else not module._is_default(name))
            except Exception:  # an entry that cannot be read is not a setting we can show
                continue
            if differs:
                current[name] = value
    for name, value in (options or {}).items():
        default = getattr(entries.get(name), "default", None) if isinstance(entries, dict) else None
        if _declared(default) and value == default:
            current.pop(name, None)
        else:
            current[name] = value
    return {name: jsonable(value) for name, value in current.items()}


def _declared(default: Any) -> bool:
    """Whether a config entry's default is a value (not torch's unset sentinel)."""
    unset = getattr(sys.modules.get("torch.utils._config_module"), "_UNSET_SENTINEL", None)
    return default is not unset


def jsonable(value: Any) -> Any:
    """A JSON value for a setting: plain values as they are, containers element-wise (sets
    sorted), anything else (a dtype, an enum, a function) as its text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((jsonable(item) for item in value), key=repr)
    if isinstance(value, dict):
        return {str(key): jsonable(item) for key, item in value.items()}
    name = getattr(value, "__qualname__", None)
    if callable(value) and name:
        return f"{getattr(value, '__module__', '')}.{name}"
    return str(value)


def setting_differences(theirs: Mapping[str, Any], ours: Mapping[str, Any],
                        ignored: frozenset[str] = PLACEMENT_KEYS) -> list[tuple[str, Any, Any]]:
    """(key, their value, our value) for each setting the two snapshots disagree on, keys in
    order; a key one side lacks reads None there."""
    keys = sorted((set(theirs) | set(ours)) - ignored)
    return [(key, theirs.get(key), ours.get(key)) for key in keys
            if theirs.get(key) != ours.get(key)]
