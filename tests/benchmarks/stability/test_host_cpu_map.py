"""benchmarks/stability/host_cpu_map.py: the map of this host's CPUs (run here on the CPU, no
CUDA)."""

from __future__ import annotations

import os

import pytest

from benchmarks.stability import host_cpu_map


def test_the_summary_counts_fast_readings_and_cpus_that_kept_their_state():
    readings = {0: [{"python_ms": 7.0}, {"python_ms": 7.2}, {"python_ms": 7.1}],
                1: [{"python_ms": 13.0}, {"python_ms": 7.0}, {"python_ms": 12.8}]}
    summary = host_cpu_map.summarize(readings, fast_within=1.4)
    assert summary["fast_below_ms"] == pytest.approx(9.8)  # 1.4 times the fastest, 7.0 ms
    assert summary["fast_share"] == pytest.approx(4 / 6)
    assert summary["steady_cpus"] == pytest.approx(0.5)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU pinning here")
def test_every_cpu_is_read_in_every_round_and_the_affinity_is_given_back(capsys, tmp_path):
    before = os.sched_getaffinity(0)
    assert host_cpu_map.main(["--json", str(tmp_path / "map.json")]) == 0
    assert os.sched_getaffinity(0) == before
    out = capsys.readouterr().out
    assert [line.split()[1] for line in out.splitlines() if line.startswith("cpu")] == \
        [str(cpu) for cpu in sorted(before)]
    assert "fast readings" in out
