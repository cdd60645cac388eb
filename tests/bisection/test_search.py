"""The search's choice of points, its bounds and its answer (bisection/search.py)."""

import pytest

from bisection.search import Search, rounds_bound
from core.files.bisect_log import BAD, GOOD, SKIPPED


def test_bisection_picks_the_middle_and_narrows():
    search = Search(24)
    assert search.next_points(1) == [11]
    search.record(11, BAD)
    assert search.bounds() == (0, 11)
    assert search.next_points(1) == [5]


def test_k_section_spreads_k_points_evenly():
    search = Search(24)
    assert search.next_points(3) == [6, 11, 17]


def test_skipped_points_are_stepped_around_and_named_in_the_answer():
    search = Search(5)
    search.record(2, SKIPPED)
    assert search.next_points(1) in ([1], [3])
    search.record(1, GOOD)
    search.record(3, BAD)
    answer = search.answer()
    assert (answer.last_good, answer.first_bad, answer.skipped_between) == (1, 3, [2])
    assert not answer.exact


def test_a_good_point_above_the_first_bad_is_reported_not_trusted():
    search = Search(6)
    search.record(2, BAD)
    search.record(4, GOOD)
    search.record(1, GOOD)
    answer = search.answer()
    assert (answer.last_good, answer.first_bad, answer.contradictions) == (1, 2, [4])


@pytest.mark.parametrize("count,k,bound", [(24, 1, 6), (24, 3, 4), (2, 1, 1), (3, 1, 2)])
def test_rounds_bound(count, k, bound):
    assert rounds_bound(count, k) == bound


def test_a_range_needs_two_points():
    with pytest.raises(ValueError, match="two points"):
        Search(1)
