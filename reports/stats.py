"""Small statistics on timing repeats, standard library only.

- `median` and `median_interval`: the median with a distribution-free interval from order
  statistics (the binomial argument: the k-th smallest and k-th largest of n samples bracket
  the true median with a probability computable from Binomial(n, 1/2)).
- `geomean`: the geometric mean of positive values.
- `permutation_p_value`: one-sided significance of a shift between two samples of repeats
  (an exact or sampled rank-sum permutation test).
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

DEFAULT_CONFIDENCE = 0.95
EXACT_PERMUTATION_LIMIT = 20_000
RANDOM_PERMUTATIONS = 10_000


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
    best = Interval(ordered[0], ordered[-1], 1.0 - 2.0 * _binomial_half_cdf(0, n))
    # Order statistics x_(j+1) and x_(n-j) (1-based) cover the median with
    # probability 1 - 2 * P(Binomial(n, 1/2) <= j).
    for j in range(1, n // 2):
        coverage = 1.0 - 2.0 * _binomial_half_cdf(j, n)
        if coverage < confidence:
            break
        best = Interval(ordered[j], ordered[n - 1 - j], coverage)
    return best


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
    seed: int = 0,
    exact_limit: int = EXACT_PERMUTATION_LIMIT,
    samples: int = RANDOM_PERMUTATIONS,
) -> Optional[float]:
    """One-sided p-value that `new` is shifted from `base` in the direction observed.

    A rank-sum (Mann-Whitney) permutation test: the statistic is the sum of NEW's ranks in
    the pooled repeats. Every split of the pooled repeats into groups of the original sizes
    is enumerated when there are at most `exact_limit` of them, otherwise `samples` random
    splits are drawn from a private, seeded generator. Returns None when either side has
    fewer than 2 repeats.
    """
    if len(base) < 2 or len(new) < 2:
        return None
    ranks = _mid_ranks(list(base) + list(new))
    n_new = len(new)
    total_ranks = len(ranks)
    expected = n_new * (total_ranks + 1) / 2.0
    observed = sum(ranks[len(base):])
    sign = 1.0 if observed >= expected else -1.0
    target = sign * (observed - expected) - 1e-9

    def extreme(new_idx: Sequence[int]) -> bool:
        return sign * (sum(ranks[i] for i in new_idx) - expected) >= target

    total = math.comb(total_ranks, n_new)
    if total <= exact_limit:
        hits = sum(extreme(idx) for idx in itertools.combinations(range(total_ranks), n_new))
        return hits / total
    rng = random.Random(seed)
    indices = list(range(total_ranks))
    hits = 0
    for _ in range(samples):
        rng.shuffle(indices)
        hits += extreme(indices[:n_new])
    # Count the observed split itself so the estimate is never 0.
    return (hits + 1) / (samples + 1)
