"""Resume: which recorded lines already hold what a new sweep would measure."""

from __future__ import annotations

from typing import Any, Iterable

from core.config import RunSettings, fingerprint_of_line, unreadable_identity
from core.schema import Status, has_timings, is_infrastructure_failure, is_verified


def covers(line: dict[str, Any], settings: RunSettings) -> bool:
    """Whether a recorded line already holds what `settings` would measure.

    A failed or skipped line covers everything (rerun with --no-resume to retry), but for a
    failure of the infrastructure (a fork server or Ray node lost), which resume retries; a
    timed line does not cover --verify, and a --verify-only line does not cover timing. A
    line of a newer schema whose identity holds fields this version cannot read covers
    nothing (`unreadable_identity`).
    """
    if is_infrastructure_failure(line) or unreadable_identity(line):
        return False
    if line.get("status") in (Status.FAILED.value, Status.SKIPPED.value):
        return True
    if settings.verify_only:
        return is_verified(line)
    return has_timings(line) and (is_verified(line) or not settings.verify)


def recorded_fingerprints(lines: Iterable[dict[str, Any]], settings: RunSettings) -> frozenset[str]:
    """Fingerprints of the experiments whose lines already hold what `settings` measures."""
    return frozenset(
        value for line in lines
        if covers(line, settings) and (value := fingerprint_of_line(line))
    )
