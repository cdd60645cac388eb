"""core/packages.py: the one list of recorded packages, and the versions a process finds."""

from __future__ import annotations

from importlib import metadata

from core import packages


def test_the_found_versions_are_the_installed_ones_of_the_list():
    found = packages.installed_packages()
    assert set(found) <= set(packages.PROBED_PACKAGES)
    for name in packages.PROBED_PACKAGES:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            assert name not in found
        else:
            assert found[name] == version


def test_every_reader_of_versions_takes_them_from_the_one_list(monkeypatch):
    """A package added to the list is probed, shown by the dashboard and, when it decides
    FLOP counts, keyed into the workload cache: no second list to update."""
    from child import workload
    from reports.analyse import dashboard

    assert workload.VERSIONED_PACKAGES == packages.COUNTED_PACKAGES
    assert set(packages.COUNTED_PACKAGES) == {"torch", "timm", "transformers"}
    assert dashboard.VERSION_KEYS == packages.PROBED_PACKAGES
    # An old line's environment with versions at its top level, one of them triton's.
    shown = dashboard._versions({"torch": "2.9.0", "triton": "3.5.0", "python": "3.11.7"})
    assert shown == {"torch": "2.9.0", "triton": "3.5.0", "python": "3.11.7"}
