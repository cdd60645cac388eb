"""What every inductor process of a host works out alike, worked out once.

Inductor's CPU vector-ISA checks: made once for the host, answered from that in children.

Before its first CPU kernel a process of inductor's asks each vector ISA the CPU lists
whether it works: it builds a small C++ program into its cache folder and loads it in a
Python child that imports torch, once per check. TORCHINDUCTOR_VEC_ISA_OK=1 skips the first
check of each ISA but not those after it (AVX-512's bf16 instructions, AMX and its fp16
ones), which every compiling child still made: about 2 CPU-seconds (and a C++ build, in a
fresh cache folder) inside its compile time, each time.

The probe makes every check once and keeps each outcome (`checked_isas`). A child, or the
fork server it is forked from, hands inductor those outcomes instead of building
(`settle_isa_checks`): inductor then picks the ISA, with the flags, that its own checks
would have given on this host. A check the probe did not make is made as before.

A fork server of compiling children answers the checks and hashes torch's and Triton's
sources (the keys of inductor's caches) before it forks (`prepare_compiling_server`):
each child forked from it then inherits them instead of working them out again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sys
from typing import Callable, Iterator, Mapping, Optional

log = logging.getLogger(__name__)

#: The outcomes of the probe's checks, for the children: JSON, {check key: passed}.
ISA_CHECKS_VARIABLE = "EXPERIMENT_INDUCTOR_ISA_CHECKS"


def check_key(arch_flags: str, code: str) -> str:
    """The key of one check: the flags it builds with and the program it builds."""
    return hashlib.sha256(f"{arch_flags}\0{code}".encode()).hexdigest()[:24]


@contextlib.contextmanager
def _check_build_replaced(answer: Callable) -> Iterator[None]:
    from torch._inductor.cpu_vec_isa import VecISA

    original = VecISA.check_build

    def check_build(isa, code: str) -> bool:
        return answer(original, isa, code)

    VecISA.check_build = check_build
    try:
        yield
    finally:
        VecISA.check_build = original


def _forget_answers() -> None:
    """Empty inductor's per-process caches of the checks, so that a search checks again."""
    from torch._inductor import cpu_vec_isa

    cpu_vec_isa.valid_vec_isa_list.cache_clear()
    for isa in cpu_vec_isa.supported_vec_isa_list:
        for kind in type(isa).__mro__:
            for name in ("__bool__", "_VecISA__bool__impl"):
                clear = getattr(kind.__dict__.get(name), "cache_clear", None)
                if clear is not None:
                    clear()


def checked_isas() -> tuple[list[str], list[str], dict[str, bool]]:
    """The vector ISAs the CPU lists, those of them that work, and the outcome of each check
    made to tell (run in the probe: it builds programs into TORCHINDUCTOR_CACHE_DIR)."""
    from torch._inductor import config, cpu_vec_isa

    outcomes: dict[str, bool] = {}

    def recorded(original, isa, code: str) -> bool:
        passed = bool(original(isa, code))
        outcomes[check_key(isa._arch_flags, code)] = passed
        return passed

    _forget_answers()
    with config.patch({"cpp.vec_isa_ok": True}), _check_build_replaced(lambda *_: True):
        listed = [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()]  # nothing built
    _forget_answers()
    with config.patch({"cpp.vec_isa_ok": None}), _check_build_replaced(recorded):
        working = [str(isa) for isa in cpu_vec_isa.valid_vec_isa_list()]
    _forget_answers()
    return listed, working, outcomes


def settle_isa_checks(encoded: Optional[str]) -> bool:
    """Answer inductor's checks in this process from the probe's outcomes (`encoded`, the
    value of ISA_CHECKS_VARIABLE): whether they were given and inductor took them."""
    if not encoded:
        return False
    try:
        outcomes = {str(key): bool(value) for key, value in json.loads(encoded).items()}
    except (ValueError, AttributeError) as error:
        log.info("%s is not a map of checks (%s): inductor checks for itself",
                 ISA_CHECKS_VARIABLE, error)
        return False

    def answered(original, isa, code: str) -> bool:
        key = check_key(isa._arch_flags, code)
        return outcomes[key] if key in outcomes else original(isa, code)

    try:
        from torch._inductor import cpu_vec_isa

        with _check_build_replaced(answered):
            cpu_vec_isa.valid_vec_isa_list()
    except (ImportError, AttributeError, TypeError) as error:  # inductor's internals moved
        log.info("inductor's vector-ISA checks not settled: %s", error)
        return False
    return True


#: Inductor's own variable for the checks' first step (its config reads it at import).
VEC_ISA_OK_VARIABLE = "TORCHINDUCTOR_VEC_ISA_OK"
#: The variables through which the probe hands its outcomes to the children: a template of
#: the server pool imports inductor without them, and each server forked from it applies
#: its runner's (`apply_probe_outcomes`), so that a sweep given them (one that compiles on
#: the CPU) and one given none (an eager sweep, a CUDA one) fork from one template.
PROBE_OUTCOME_VARIABLES = frozenset({VEC_ISA_OK_VARIABLE, ISA_CHECKS_VARIABLE})
#: A fork server that imported it forks compiling children.
COMPILER_MODULE = "torch._inductor.compile_fx"


def apply_probe_outcomes(environment: Mapping[str, str]) -> None:
    """In a server forked from a template that imported inductor without the probe's
    outcomes: take them from `environment` as a process started under it would have (the
    vector-ISA flag read into inductor's config, and, in a compiling server, the checks
    answered)."""
    config = sys.modules.get("torch._inductor.config")
    if config is None:
        return
    value = environment.get(VEC_ISA_OK_VARIABLE)
    config.cpp.vec_isa_ok = True if value == "1" else False if value == "0" else None
    if COMPILER_MODULE in sys.modules:
        settle_isa_checks(environment.get(ISA_CHECKS_VARIABLE))


def prepare_compiling_server(environment: Mapping[str, str]) -> None:
    """Work out in a fork server, before it forks, what each compiling child would work out
    alike: the vector-ISA checks (from the probe's outcomes in `environment`) and the
    hashes of torch's and Triton's sources. Nothing is compiled and no device is touched."""
    settle_isa_checks(environment.get(ISA_CHECKS_VARIABLE))
    try:
        from torch._inductor.codecache import torch_key
        from torch._inductor.runtime.triton_compat import HAS_TRITON, triton_key

        torch_key()
        if HAS_TRITON:
            triton_key()
    except (ImportError, AttributeError, TypeError) as error:  # inductor's internals moved
        log.info("inductor's source hashes left to each child: %s", error)
