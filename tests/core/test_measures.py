"""The table of measured figures (core.measures) holds together."""

import pytest

from core.measures import PRINTS, Measure, measure_named, measures


def test_each_figure_has_one_name_one_csv_column_and_one_dashboard_key():
    names = [m.name for m in measures()]
    columns = [m.csv_column for m in measures() if m.csv_column]
    keys = [m.data_key for m in measures() if m.data_key]
    assert len(set(names)) == len(names) and len(set(columns)) == len(columns) and len(set(keys)) == len(keys)


def test_a_figure_names_only_figures_as_its_note_and_condition():
    for m in measures():
        if m.note:
            assert measure_named(m.note).data_key, m.name  # the page shows the note too
        if m.when:
            assert measure_named(m.when).kind is bool, m.name
        assert m.prints in PRINTS


def test_a_figure_prints_by_its_kind_unless_told_and_refuses_an_unknown_style():
    assert Measure("x", ("summary.x",), str).prints == "text"
    assert Measure("x", ("summary.x",), bool).prints == "flag"
    assert Measure("x", ("summary.x",)).prints == "number"
    with pytest.raises(ValueError, match="prints 'fancy'"):
        Measure("x", ("summary.x",), prints="fancy")
    with pytest.raises(ValueError, match="kind"):
        Measure("x", ("summary.x",), dict)
