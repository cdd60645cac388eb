"""Small statistics on timing repeats, standard library only.

- `median` and `median_interval`: the median with a distribution-free interval from order
  statistics (the binomial argument: the k-th smallest and k-th largest of n samples bracket
  the true median with a probability computable from Binomial(n, 1/2)).
- `geomean`: the geometric mean of positive values.
- `permutation_p_value`: one-sided significance of a shift between two samples of repeats
  (a rank-sum test: exact by enumeration for few repeats, else the normal approximation).
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

DEFAULT_CONFIDENCE = 0.95
EXACT_PERMUTATION_LIMIT = 5_000


@dataclass(frozen=True)
class Interval:
    """An interval around a median and the probability that it holds the true median."""

    low: float
    high: float
    coverage: float


def finite_numbers(values: object) -> list[float]:
    """The finite numbers of a list (anything else in it is dropped); [] if not a list."""
    if not isinstance(values, (list, tuple)):
        return []
    return [
        float(v)
        for v in values
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    ]


def median(values: Sequence[float]) -> Optional[float]:
    """The median, or None for no values."""
    return statistics.median(values) if values else None


def _binomial_half_cdf(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    if k < 0:
        return 0.0
    return sum(math.comb(n, i) for i in range(0, min(k, n) + 1)) / 2.0**n


@functools.lru_cache(maxsize=1024)
def _order_statistic(n: int, confidence: float) -> tuple[int, float]:
    """(j, coverage): use the (j+1)-th smallest and largest of n samples."""
    # Order statistics x_(j+1) and x_(n-j) (1-based) cover the median with
    # probability 1 - 2 * P(Binomial(n, 1/2) <= j).
    best = (0, 1.0 - 2.0 * _binomial_half_cdf(0, n))
    for j in range(1, n // 2):
        coverage = 1.0 - 2.0 * _binomial_half_cdf(j, n)
        if coverage < confidence:
            break
        best = (j, coverage)
    return best


def median_interval(values: Sequence[float], confidence: float = DEFAULT_CONFIDENCE) -> Optional[Interval]:
    """Order-statistic interval for the median.

    Picks the narrowest symmetric pair of order statistics whose coverage reaches
    `confidence`. With fewer than 6 repeats no pair reaches 95%; then the range (min, max)
    is returned with the coverage it does have (1 - 2**(1-n)).
    """
    n = len(values)
    if n == 0:
        return None
    ordered = sorted(values)
    if n == 1:
        return Interval(ordered[0], ordered[0], 0.0)
    j, coverage = _order_statistic(n, confidence)
    return Interval(ordered[j], ordered[n - 1 - j], coverage)


def geomean(values: Iterable[float]) -> Optional[float]:
    """Geometric mean of the positive finite values; None when there are none."""
    logs = [math.log(v) for v in values if isinstance(v, (int, float)) and v > 0 and math.isfinite(v)]
    if not logs:
        return None
    return math.exp(math.fsum(logs) / len(logs))


def _mid_ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing the mean of their ranks."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for k in range(start, end + 1):
            ranks[order[k]] = (start + end) / 2.0 + 1.0
        start = end + 1
    return ranks


def permutation_p_value(
    base: Sequence[float],
    new: Sequence[float],
    *,
    exact_limit: int = EXACT_PERMUTATION_LIMIT,
) -> Optional[float]:
    """One-sided p-value that `new` is shifted from `base` in the direction observed.

    A rank-sum (Mann-Whitney) test: the statistic is the sum of NEW's ranks among the
    pooled repeats. When there are at most `exact_limit` ways to split the pooled repeats
    into groups of the original sizes, all are enumerated (an exact permutation test);
    otherwise the normal approximation with tie and continuity corrections is used.
    Returns None when either side has fewer than 2 repeats.
    """
    if len(base) < 2 or len(new) < 2:
        return None
    ranks = _mid_ranks(list(base) + list(new))
    n_base, n_new = len(base), len(new)
    total_ranks = len(ranks)
    expected = n_new * (total_ranks + 1) / 2.0
    observed = sum(ranks[n_base:])
    sign = 1.0 if observed >= expected else -1.0
    excess = sign * (observed - expected)
    total = math.comb(total_ranks, n_new)
    if total <= exact_limit:
        hits = sum(
            sign * (sum(ranks[i] for i in idx) - expected) >= excess - 1e-9
            for idx in itertools.combinations(range(total_ranks), n_new)
        )
        return hits / total
    counts: dict[float, int] = {}
    for rank in ranks:
        counts[rank] = counts.get(rank, 0) + 1
    ties = sum(t**3 - t for t in counts.values())
    variance = n_base * n_new / 12.0 * ((total_ranks + 1) - ties / (total_ranks * (total_ranks - 1)))
    if variance <= 0:
        return 1.0
    z = (excess - 0.5) / math.sqrt(variance)
    return 0.5 * math.erfc(z / math.sqrt(2.0))


@functools.lru_cache(maxsize=256)
def _u_counts(n_base: int, n_new: int) -> tuple[int, ...]:
    """How many of the C(n_base + n_new, n_new) splits give each value of U (no ties)."""
    if n_base == 0 or n_new == 0:
        return (1,)
    # U counts pairs (base, new) with new above base; the largest pooled value is either
    # in NEW (adding n_base to U) or in BASE (adding nothing).
    with_new = _u_counts(n_base, n_new - 1)
    with_base = _u_counts(n_base - 1, n_new)
    counts = [0] * (n_base * n_new + 1)
    for u, count in enumerate(with_new):
        counts[u + n_base] += count
    for u, count in enumerate(with_base):
        counts[u] += count
    return tuple(counts)


def rank_sum_p_from_u(
    u: float, n_base: int, n_new: int, *, exact_limit: int = EXACT_PERMUTATION_LIMIT
) -> Optional[float]:
    """The p-value of `permutation_p_value` from its statistic alone.

    `u` counts the (base, new) pairs where new is larger (ties count one half), so the
    engine can compute it for many experiments at once. Without ties this is exactly
    `permutation_p_value`: the same enumeration (through the distribution of U) when there
    are at most `exact_limit` splits, else the same normal approximation.
    """
    if n_base < 2 or n_new < 2:
        return None
    mean = n_base * n_new / 2.0
    sign = 1.0 if u >= mean else -1.0
    excess = sign * (u - mean)
    total = math.comb(n_base + n_new, n_new)
    if total <= exact_limit:
        counts = _u_counts(n_base, n_new)
        hits = sum(count for value, count in enumerate(counts) if sign * (value - mean) >= excess - 1e-9)
        return hits / total
    pooled = n_base + n_new
    variance = n_base * n_new / 12.0 * (pooled + 1)
    z = (excess - 0.5) / math.sqrt(variance)
    return 0.5 * math.erfc(z / math.sqrt(2.0))
