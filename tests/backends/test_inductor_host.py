"""Inductor's CPU vector-ISA checks made once (backends/runtimes/inductor_host.py): the probe's
outcomes answer a child's checks, which then picks the same ISA with the same flags as its
own checks would, without building a program or starting a process. Each side runs in a
fresh interpreter: inductor keeps its answers for the life of a process."""

from __future__ import annotations

import json
import os
import platform
import shutil

import pytest

from backends.runtimes.inductor_host import ISA_CHECKS_VARIABLE, settle_isa_checks
from tests.conftest import probe_as_runners_key_it, words_printed_by

checks_isas_with_gcc = pytest.mark.skipif(
    platform.machine() != "x86_64" or not shutil.which("g++"),
    reason="inductor checks vector ISAs with g++ on x86 CPUs")

#: The ISAs and build flags inductor picks, after settling the checks or not (SETTLE), and
#: the CPU time of the processes it started meanwhile.
PICK = """
import json, os, resource
import torch._inductor.compile_fx
from backends.runtimes.inductor_host import settle_isa_checks
settled = settle_isa_checks(os.environ.get("SETTLE"))
from torch._inductor.cpu_vec_isa import pick_vec_isa, valid_vec_isa_list
isa = pick_vec_isa()
children = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"settled": settled, "isas": [str(each) for each in valid_vec_isa_list()],
                  "flags": isa.build_arch_flags(),
                  "children_cpu_s": children.ru_utime + children.ru_stime}))
"""


def run_json(code: str, cache, **variables: str) -> dict:
    environment = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), **variables}
    return json.loads(" ".join(words_printed_by(code, env=environment)))


@pytest.mark.e2e
@checks_isas_with_gcc
def test_the_probes_outcomes_answer_a_childs_checks_without_a_build_or_a_process(tmp_path):
    """The outcomes the runners' probe recorded (once for the suite) against a child that
    is given none of them (`{}`): it makes its checks itself, as before."""
    outcomes = probe_as_runners_key_it().child_environment[ISA_CHECKS_VARIABLE]
    assert json.loads(outcomes) and all(json.loads(outcomes).values())
    settled = run_json(PICK, tmp_path / "settled", TORCHINDUCTOR_VEC_ISA_OK="1", SETTLE=outcomes)
    own = run_json(PICK, tmp_path / "own", TORCHINDUCTOR_VEC_ISA_OK="1", SETTLE="{}")
    assert settled["settled"] and own["settled"]
    assert (settled["isas"], settled["flags"]) == (own["isas"], own["flags"])
    assert settled["children_cpu_s"] == 0
    assert not (tmp_path / "settled").exists()  # nothing built
    if "-mavx512bf16" in own["flags"]:  # a check past AVX-512's first, made by the child
        assert own["children_cpu_s"] > 0 and any((tmp_path / "own").rglob("*.cpp"))


@pytest.mark.parametrize("value", ["[1, 2]", "not json", ""])
def test_a_value_that_is_not_a_map_of_outcomes_settles_nothing(value, caplog):
    caplog.set_level("INFO")
    assert settle_isa_checks(value) is False
    if value:
        assert ISA_CHECKS_VARIABLE in caplog.text
