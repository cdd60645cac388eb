"""Find out what this machine can run, in a child process.

The parent must not start runtimes, and importing torch costs seconds, so one small child
imports torch (never torch_xla, torchax or jax) and reports versions, CUDA devices and the
registered dynamo backends as JSON. Package versions come from metadata, without importing.

The answer is kept for a day in the cache folder (`core.host.cache_root()/host`), under a
key of everything it depends on: the interpreter, every import path with its modification
time (installing or removing a package changes it), the package versions, the device nodes
(/dev/nvidia*, /dev/accel*, /dev/vfio/*), the variables that choose devices, and the boot.
`--no-probe-cache` asks the child again.
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from core.host import HostCapabilities, cache_root
from runner.common.packages import installed_packages

log = logging.getLogger(__name__)

def probe_in_this_process() -> dict[str, Any]:
    """The probe's answer (run inside the probe child)."""
    answer: dict[str, Any] = {"python": platform.python_version(), "packages": installed_packages()}
    try:
        import torch
    except Exception as error:  # a broken torch is reported, not raised
        answer["torch_error"] = f"{type(error).__name__}: {error}"
        return answer
    answer["torch_version"] = torch.__version__
    answer["cuda_available"] = bool(torch.cuda.is_available())
    if answer["cuda_available"]:
        answer["cuda_device_names"] = [
            torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())
        ]
    try:
        answer["dynamo_backends"] = sorted(torch._dynamo.list_backends(exclude_tags=()))
    except Exception as error:
        log.debug("dynamo backends unknown: %s", error)
    return answer


PROBE_CACHE_SECONDS = 24 * 3600
#: Variables that change which devices the probe child sees.
DEVICE_VARIABLES = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "PJRT_DEVICE",
                    "TPU_VISIBLE_CHIPS", "JAX_PLATFORMS", "LD_LIBRARY_PATH", "PYTHONPATH")


def probe_key() -> str:
    """What the probe's answer depends on, hashed."""
    paths = []
    for entry in sys.path:  # PYTHONPATH's entries among them
        try:
            paths.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            paths.append((entry, None))
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    devices = sorted(glob.glob("/dev/nvidia*") + glob.glob("/dev/accel*") + glob.glob("/dev/vfio/*"))
    identity = {"executable": sys.executable, "python": sys.version, "paths": paths,
                "packages": installed_packages(), "devices": devices, "boot": boot,
                "variables": {name: os.environ.get(name) for name in DEVICE_VARIABLES}}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]


def probe_cache_path() -> Path:
    return cache_root() / "host" / f"{probe_key()}.json"


def cached_answer(path: Path) -> Optional[HostCapabilities]:
    """The cached answer at `path` if it is younger than a day and readable."""
    try:
        if time.time() - path.stat().st_mtime > PROBE_CACHE_SECONDS:
            return None
        return HostCapabilities.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def keep_answer(path: Path, answer: dict[str, Any]) -> None:
    """Write the answer atomically; a cache that cannot be written is only logged."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".host-")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(answer, out)
        os.replace(temporary, path)
    except OSError as error:
        log.debug("the probe's answer was not cached: %s", error)


def probe_host(timeout: float = 300.0, use_cache: bool = True) -> HostCapabilities:
    """What this machine can run: the cached answer when it still holds, else the probe
    child's (failures give a torch-less answer, never cached)."""
    path = probe_cache_path() if use_cache else None
    if path is not None:
        cached = cached_answer(path)
        if cached is not None:
            log.debug("host capabilities from %s", path)
            return cached
    answer = run_probe(timeout)
    if path is not None and "torch_error" not in answer:
        keep_answer(path, answer)
    return HostCapabilities.from_dict(answer)


def run_probe(timeout: float) -> dict[str, Any]:
    """Run the probe child: its answer, or a torch-less one saying why it gave none."""
    try:
        completed = subprocess.run([sys.executable, "-m", "runner.plan.probe"], capture_output=True,
                                   text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"packages": installed_packages(),
                "torch_error": f"the probe took over {timeout:.0f} s"}
    try:
        answer = json.loads(completed.stdout.strip().splitlines()[-1])
        if isinstance(answer, dict):
            return answer
    except (ValueError, IndexError):
        pass
    tail = completed.stderr.strip()[-500:]
    return {"packages": installed_packages(),
            "torch_error": f"the probe exited with {completed.returncode}: {tail}"}

if __name__ == "__main__":
    print(json.dumps(probe_in_this_process()))
