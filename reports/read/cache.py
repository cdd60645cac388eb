"""Per-file cache of the engine's normalised rows, so a year of results reads in seconds.

Results files only grow: the runner appends whole lines. The first read of a file parses all
of it (DuckDB) and stores its usable rows as Parquet, with what was set aside (bad lines,
lines naming no model) and each run's provenance, in a folder of the cache keyed by the
file's real path. A later read checks that the bytes parsed then are unchanged (device,
inode, size, digests of the first and last 64 KiB of that part) and parses only what was
appended since; anything else (a file replaced, truncated or rewritten) is parsed again from
scratch. An unterminated last line (a writer still at work) is parsed every time and never
cached.

The cache lives in `$EXPERIMENT_RUNNER_CACHE_DIR`, else `$XDG_CACHE_HOME/experiment-runner/
reports`, else `~/.cache/experiment-runner/reports`; `--no-cache` reads without it.

The runner keeps it too: at the end of a sweep, `refresh` parses what the sweep appended to a
large results file (runner/run/record/report_cache.py), so that the first report after a sweep reads
no line of it again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any, Optional

from filelock import FileLock, Timeout

from core.host.machine import cache_root
from core.files.results_file import BadLine
from reports.read import engine as eng
from reports.read.engine import FileScan

log = logging.getLogger(__name__)

SAMPLE = 1 << 16
MAX_PARTS = 16
LOCK_TIMEOUT_S = 120
#: The smallest results file `refresh` caches: below it a report parses the whole file in
#: about a tenth of a second, and the sweep is spared DuckDB's start (32 MiB: about 5,000
#: lines of a few kilobytes).
#: How long `refresh` waits for a report that holds the cache's lock.
REFRESH_LOCK_TIMEOUT_S = 1.0


def default_cache_dir() -> Path:
    explicit = os.environ.get("EXPERIMENT_RUNNER_CACHE_DIR")
    if explicit:
        return Path(explicit)
    return cache_root() / "reports"


def _digest(path: Path, start: int, stop: int) -> str:
    with open(path, "rb") as raw:
        raw.seek(max(0, start))
        return hashlib.sha256(raw.read(max(0, stop - max(0, start)))).hexdigest()


def _terminated_size(path: Path, size: int) -> int:
    """Bytes up to and including the last newline."""
    if size == 0:
        return 0
    with open(path, "rb") as raw:
        position = size
        while position > 0:
            step = min(SAMPLE, position)
            raw.seek(position - step)
            chunk = raw.read(step)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                return position - step + newline + 1
            position -= step
    return 0


def _copy_range(path: Path, start: int, stop: int, target: Path) -> None:
    with open(path, "rb") as source, open(target, "wb") as sink:
        source.seek(start)
        remaining = stop - start
        while remaining > 0:
            chunk = source.read(min(1 << 24, remaining))
            if not chunk:
                break
            sink.write(chunk)
            remaining -= len(chunk)


def _uncached(con: Any, path: Path, table: str, settings: bool = True) -> FileScan:
    # Nothing is kept: the details are read only for the lines selected, the settings only
    # where asked for.
    parsed = eng.parse(con, path, table, terminated_bytes=path.stat().st_size, display=path,
                    line_offset=0, details=False, settings=settings)
    return eng.FileScan(path, f"({eng.rows_relation(table, 0, settings=settings)})", parsed.rows, parsed.bad,
                        parsed.unusable, parsed.provenance,
                        settings=_merged(parsed.settings, parsed.partial_settings) if settings else None,
                        details=False, index=parsed.index)


def _merged(*settings: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Settings counted over several parts of a file, counted together."""
    counts: dict[str, int] = {}
    for part in settings:
        for text, count in part:
            counts[text] = counts.get(text, 0) + int(count)
    return sorted(counts.items())


def open_file(con: Any, temp: Path, cache_dir: Optional[Path], path: Path, table: str,
              settings: bool = True) -> FileScan:
    """The file's usable rows as a relation (rows parsed into TEMP table `table`, and the
    cache's Parquet parts), from the cache in `cache_dir` where it can (None: no cache).
    Without `settings`, a file read without the cache leaves its lines' settings unread."""
    if path.is_dir():
        from reports.errors import ReportError

        raise ReportError(f"results path {str(path)!r} is a folder, not a file")
    if cache_dir is None:
        return _uncached(con, path, table, settings)
    real = os.path.realpath(path)
    try:
        folder, lock = _locked_folder(Path(cache_dir), real, LOCK_TIMEOUT_S)
    except (OSError, Timeout) as error:
        log.warning("report cache unusable (%s): reading %s without it", error, path)
        return _uncached(con, path, table, settings)
    try:
        return _open_cached(con, temp, path, real, folder, table)
    finally:
        lock.release()


def _locked_folder(cache_dir: Path, real: str, timeout: float) -> tuple[Path, FileLock]:
    """The cache's folder of the file at real path `real`, made if need be, and its lock, held."""
    folder = cache_dir / hashlib.sha256(real.encode("utf-8")).hexdigest()[:24]
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(folder / "lock"), timeout=timeout)
    lock.acquire()
    return folder, lock


def _meta_matches(meta: dict[str, Any], path: Path, stat: os.stat_result) -> bool:
    try:
        size = int(meta["size"])
        return (
            meta.get("schema") == eng.SCHEMA_VERSION
            and meta.get("duckdb") == _duckdb_version()
            and meta.get("dev") == stat.st_dev
            and meta.get("ino") == stat.st_ino
            and stat.st_size >= size
            and meta.get("head") == _digest(path, 0, min(size, SAMPLE))
            and meta.get("tail") == _digest(path, size - SAMPLE, size)
            and all(Path(p).exists() for p in meta.get("parts", []))
        )
    except (KeyError, TypeError, ValueError, OSError):
        return False


def _duckdb_version() -> str:
    import duckdb

    return duckdb.__version__


def _read_meta(folder: Path) -> dict[str, Any]:
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        return meta if isinstance(meta, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_meta(folder: Path, meta: dict[str, Any]) -> None:
    temporary = folder / f"meta.{uuid.uuid4().hex}.tmp"
    temporary.write_text(json.dumps(meta), encoding="utf-8")
    os.replace(temporary, folder / "meta.json")


def _write_part(con: Any, folder: Path, relation: str) -> str:
    part = folder / f"part-{uuid.uuid4().hex[:12]}.parquet"
    con.execute(f"COPY ({relation}) TO '{part}' (FORMAT parquet)")
    return str(part)


def _open_cached(con: Any, temp: Path, path: Path, real: str, folder: Path, table: str) -> FileScan:
    stat = path.stat()
    size = stat.st_size
    terminated = _terminated_size(path, size)
    meta = _read_meta(folder)
    relations: list[str] = []
    if meta and _meta_matches(meta, path, stat):
        cached_size = int(meta["size"])
        rows, lines = int(meta["rows"]), int(meta["lines"])
        bad = [BadLine(str(path), int(n), str(r)) for n, r in meta.get("bad", [])]
        unusable = [int(n) for n in meta.get("unusable", [])]
        provenance = {k: eng.Provenance.from_dict(v) for k, v in meta.get("runs", {}).items()}
        settings = [(str(text), int(count)) for text, count in meta.get("settings", [])]
        partial_settings: list[tuple[str, int]] = []
        parts = list(meta.get("parts", []))
        from_cache = True
        if size > cached_size:
            tail = temp / f"{table}.tail.jsonl"
            _copy_range(path, cached_size, size, tail)
            parsed = eng.parse(con, tail, table, terminated_bytes=terminated - cached_size,
                            display=path, line_offset=lines)
            if parsed.terminated_rows:
                part = _write_part(con, folder, eng.rows_relation(table, rows, below=parsed.terminated_rows))
                parts.append(part)
            relations.append(eng.rows_relation(table, rows, at_least=parsed.terminated_rows))
            bad += parsed.bad
            unusable += parsed.unusable
            for run, prov in parsed.provenance.items():
                provenance.setdefault(run, prov)
            settings = _merged(settings, parsed.settings)
            partial_settings = parsed.partial_settings
            rows += parsed.terminated_rows
            lines += parsed.lines
            total = rows + (parsed.rows - parsed.terminated_rows)
        else:
            total = rows
        if len(parts) > MAX_PARTS:
            merged = _write_part(con, folder, f"SELECT * FROM read_parquet({_list(parts)})")
            for old in parts:
                Path(old).unlink(missing_ok=True)
            parts = [merged]
    else:
        for stale in folder.glob("part-*.parquet"):
            stale.unlink(missing_ok=True)
        parsed = eng.parse(con, path, table, terminated_bytes=terminated, display=path,
                        line_offset=0)
        part = _write_part(con, folder, eng.rows_relation(table, 0, below=parsed.terminated_rows))
        parts = [part]
        # This process reads the parsed rows from memory; later ones from the Parquet part.
        relations.append(eng.rows_relation(table, 0))
        bad, unusable, provenance = parsed.bad, parsed.unusable, parsed.provenance
        settings, partial_settings = parsed.settings, parsed.partial_settings
        rows, lines, total = parsed.terminated_rows, parsed.lines, parsed.rows
        from_cache = False
    cached_size = terminated
    # Bad lines in the unterminated last line are reported but not kept in the cache.
    kept_bad = [b for b in bad if b.lineno <= lines]
    new_meta = {
        "schema": eng.SCHEMA_VERSION, "duckdb": _duckdb_version(), "path": real,
        "dev": stat.st_dev, "ino": stat.st_ino, "size": cached_size, "rows": rows, "lines": lines,
        "head": _digest(path, 0, min(cached_size, SAMPLE)),
        "tail": _digest(path, cached_size - SAMPLE, cached_size),
        "parts": parts,
        "bad": [[b.lineno, b.reason] for b in kept_bad],
        "unusable": [n for n in unusable if n <= lines],
        "runs": {k: v.to_dict() for k, v in provenance.items()},
        "settings": [[text, count] for text, count in settings],
    }
    if new_meta != meta:
        _write_meta(folder, new_meta)
    if from_cache:
        relations.insert(0, f"SELECT * FROM read_parquet({_list(parts)})")
    relation = "(" + " UNION ALL ".join(relations) + ")"
    return eng.FileScan(path, relation, total, bad, sorted(unusable), provenance, from_cache,
                        settings=_merged(settings, partial_settings))


def refresh(path: Path, cache_dir: Optional[Path] = None) -> bool:
    """Bring the cache of results file `path` up to date, as a report reading it would:
    parse what was appended since it was last cached (all of it the first time) and keep
    it. Returns whether the cache was brought up to date (not when a report holds it, or it
    cannot be made). The runner calls it once a sweep has appended its lines
    (runner/run/record/report_cache.py: only for a large file)."""
    path = Path(path)
    real = os.path.realpath(path)
    try:
        # A report holding the lock is caching the file itself: nothing to wait for.
        folder, lock = _locked_folder(Path(cache_dir or default_cache_dir()), real, REFRESH_LOCK_TIMEOUT_S)
    except (OSError, Timeout) as error:
        log.info("the reports' cache of %s not refreshed: %s", path, error)
        return False
    temp = Path(tempfile.mkdtemp(prefix="experiment-runner-reports-"))
    try:
        con = eng.connect(temp)
        try:
            _open_cached(con, temp, path, real, folder, "refreshed")
        finally:
            con.close()
    finally:
        lock.release()
        shutil.rmtree(temp, ignore_errors=True)
    return True


def _list(paths: list[str]) -> str:
    return "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"


def clear(cache_dir: Path) -> None:
    """Remove the whole cache folder (tests, or a user who wants the space back)."""
    shutil.rmtree(cache_dir, ignore_errors=True)
