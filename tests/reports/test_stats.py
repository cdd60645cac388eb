import math
import statistics

import pytest

from reports.stats import finite_numbers, geomean, median_interval, permutation_p_value


def test_finite_numbers_drops_junk():
    assert finite_numbers([1, 2.5, "x", None, float("nan"), float("inf"), True]) == [1.0, 2.5]
    assert finite_numbers("not a list") == []


def test_median_interval_small_sample_is_range_with_its_coverage():
    interval = median_interval([3.0, 1.0, 2.0])
    assert (interval.low, interval.high) == (1.0, 3.0)
    assert interval.coverage == pytest.approx(1 - 2 ** (1 - 3))


def test_median_interval_large_sample_narrows_and_keeps_95_percent():
    values = [float(v) for v in range(1, 21)]
    interval = median_interval(values)
    assert interval.coverage >= 0.95
    assert 1.0 < interval.low <= statistics.median(values) <= interval.high < 20.0
    # One step narrower would fall under 95%.
    n, j = len(values), values.index(interval.low) + 1
    narrower = 1 - 2 * sum(math.comb(n, i) for i in range(j + 1)) / 2**n
    assert narrower < 0.95


def test_geomean():
    values = [1.5, 2.0, 4.0]
    assert geomean(values) == pytest.approx((1.5 * 2.0 * 4.0) ** (1 / 3))
    assert geomean([]) is None
    assert geomean([0.0, -1.0]) is None


def test_permutation_fully_separated_three_by_three():
    # Only 1 of the C(6,3)=20 splits puts the three largest in NEW.
    assert permutation_p_value([1.0, 1.1, 1.2], [2.0, 2.1, 2.2]) == pytest.approx(1 / math.comb(6, 3))


def test_permutation_same_distribution_not_significant():
    p = permutation_p_value([1.0, 1.2, 1.1, 1.3], [1.05, 1.25, 1.15, 1.0])
    assert p > 0.2


def test_normal_approximation_agrees_with_exact_enumeration():
    base = [1.00, 1.03, 0.98, 1.05, 1.01, 0.99, 1.02]
    new = [1.04, 1.08, 1.02, 1.10, 1.06, 1.03, 1.07]
    exact = permutation_p_value(base, new, exact_limit=10**6)
    approx = permutation_p_value(base, new, exact_limit=0)
    assert exact < 0.05
    assert approx == pytest.approx(exact, abs=0.01)
    # Direction: the same samples swapped give the same one-sided evidence.
    assert permutation_p_value(new, base, exact_limit=0) == pytest.approx(approx)


def test_large_fully_separated_samples_are_highly_significant():
    base = [1.0 + 0.01 * i for i in range(30)]
    new = [1.5 + 0.01 * i for i in range(30)]
    assert permutation_p_value(base, new) < 1e-6


def test_permutation_needs_two_repeats():
    assert permutation_p_value([1.0], [2.0, 3.0]) is None
