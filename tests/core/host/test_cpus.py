"""Logical CPUs: Linux's CPU lists and SMT siblings (core/host/cpus.py)."""

from __future__ import annotations

from core.host.cpus import cpu_list, outside_siblings, parse_cpu_list, physical_cores


def smt_pairs(core: int) -> tuple[int, ...]:
    """8 physical cores of 2 threads, Linux's usual numbering: CPU n and n + 8 share a core."""
    return (core % 8, core % 8 + 8)


def test_siblings_outside_the_runners_cores_are_ignored():
    assert physical_cores([0, 1, 9], siblings=smt_pairs) == [(0,), (1, 9)]


def test_cpu_lists_read_and_written_as_linux_writes_them():
    assert parse_cpu_list("0-2,32,34-35\n") == (0, 1, 2, 32, 34, 35)
    assert cpu_list((35, 0, 1, 2, 32, 34)) == "0-2,32,34-35"


def test_outside_siblings_are_the_threads_a_share_does_not_hold():
    assert outside_siblings([0, 1, 9], siblings=smt_pairs) == (8,)
    assert outside_siblings([0, 8], siblings=smt_pairs) == ()


def test_a_cpu_linux_says_nothing_about_is_its_own_core():
    from core.host.cpus import thread_siblings

    assert thread_siblings(10**6) == (10**6,)
