"""After a sweep: the reports' cache of its results file brought up to date.

A report reads a results file through a cache of its parsed lines (reports/read/cache.py),
so that only what was appended since the last report is parsed. The runner refreshes that
cache once its sweep has appended its lines: the first report after a sweep then parses
nothing again, however many nights the file holds. Files under
`reports.read.cache.REFRESH_MIN_BYTES` are left alone (a report parses them in a tenth of a
second), and without the reports' extra (DuckDB) nothing is done.
"""

from __future__ import annotations

import importlib.util
import logging
import time
from pathlib import Path

log = logging.getLogger(__name__)


def refresh_report_cache(results_path: Path) -> None:
    """Parse what the sweep appended to `results_path` into the reports' cache; never fails
    the sweep (a cache that cannot be written is only a slower first report)."""
    if importlib.util.find_spec("duckdb") is None:  # the runner without the reports' extra
        return
    try:
        from reports.read.cache import refresh
    except ImportError:  # the runner without the reports
        return
    started = time.perf_counter()
    try:
        refreshed = refresh(Path(results_path))
    except Exception as error:  # noqa: BLE001 - anything: the lines are written already
        log.warning("the reports' cache of %s was not refreshed (%s); the next report parses "
                    "what this sweep wrote", results_path, error)
        return
    if refreshed:
        log.info("reports' cache of %s refreshed in %.2f s", results_path, time.perf_counter() - started)
