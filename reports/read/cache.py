"""Per-file cache of the engine's normalised rows, so a year of results reads in seconds.

Results files only grow: the runner appends whole lines. The first read of a file parses all
of it (DuckDB) and stores its usable rows as Parquet, with what was set aside (bad lines,
lines naming no model) and each run's provenance, in a folder of the cache keyed by the
file's real path. A later read trusts the cached rows only for the very bytes they were
parsed from: when the file's status (device, inode, size, modification and change times
to the nanosecond) is the one recorded, nothing changed; otherwise the bytes cached are
read again and their CRC-32 compared with the one recorded, so that any change to them (a
line in the middle rewritten in place, at the same size) is seen. Then only what was
appended since is parsed; anything else (a file replaced, truncated or edited) is parsed
again from scratch. A status taken while the file was being written (its times too recent
to tell a later edit apart) is never trusted alone. An unterminated last line (a writer
still at work) is parsed every time and never cached.

A damaged cache (a Parquet part cut short or changed, a `meta.json` that is no JSON or of
the wrong shape) is removed and built again; a cache that cannot be written (a full disk, a
file-size limit) is left as it is and the file is read without it, from memory.

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
import time
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from filelock import FileLock, Timeout

from core.host.machine import cache_root
from core.files.results_file import BadLine
from reports.errors import ReportError
from reports.read import engine as eng
from reports.read import sql
from reports.read.engine import FileScan

log = logging.getLogger(__name__)

MAX_PARTS = 16
LOCK_TIMEOUT_S = 120
#: How long `refresh` waits for a report that holds the cache's lock.
REFRESH_LOCK_TIMEOUT_S = 1.0
#: A file modified this recently may be modified again within the same tick of the file
#: system's clock, at the same size, without its status changing: its status alone is not
#: trusted (the bytes cached are compared instead), and `refresh` waits this long for it.
RACY_NS = 100_000_000
#: Bytes read at a time to digest a file.
_CHUNK = 1 << 24


def default_cache_dir() -> Path:
    explicit = os.environ.get("EXPERIMENT_RUNNER_CACHE_DIR")
    if explicit:
        return Path(explicit)
    return cache_root() / "reports"


class _Damaged(Exception):
    """The cache's folder holds something no version of this cache wrote."""


class _Unwritable(Exception):
    """The cache (or a scratch file of its reading) could not be written."""


def _status(stat: os.stat_result) -> list[int]:
    """What changes with any write to the file: device, inode, size, mtime and ctime (ns)."""
    return [stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


def _racy(stat: os.stat_result) -> bool:
    """Whether the file was modified so recently that an edit now could leave its status
    as it is (the same tick of the file system's clock)."""
    return max(stat.st_mtime_ns, stat.st_ctime_ns) > time.time_ns() - RACY_NS


def _settled_stat(path: Path, wait: bool) -> tuple[os.stat_result, bool]:
    """The file's status, and whether it is racy; with `wait`, a racy status is taken again
    once the clock has moved on (once: a file written all the while stays racy)."""
    stat = os.stat(path)
    if wait and _racy(stat):
        time.sleep(RACY_NS / 1e9)
        stat = os.stat(path)
    return stat, _racy(stat)


def _crc(path: Path, stop: int) -> Optional[int]:
    """CRC-32 of the file's first `stop` bytes (None if it holds fewer)."""
    return eng.crc32_of(path, stop)


def _terminated_size(path: Path, size: int) -> int:
    """Bytes up to and including the last newline."""
    if size == 0:
        return 0
    step_size = 1 << 16
    with open(path, "rb") as raw:
        position = size
        while position > 0:
            step = min(step_size, position)
            raw.seek(position - step)
            chunk = raw.read(step)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                return position - step + newline + 1
            position -= step
    return 0


def _copy_range(path: Path, start: int, stop: int, target: Path, digested: int, crc: int) -> int:
    """Copy bytes `start` to `stop` of the file to `target`; `crc` (the CRC-32 of the bytes
    before `start`) continued over the first `digested` of them. _Unwritable when the copy
    cannot be written."""
    value = crc
    with open(path, "rb") as source:
        try:
            sink = open(target, "wb")
        except OSError as error:
            raise _Unwritable(f"{target}: {error.strerror or error}") from error
        with sink:
            source.seek(start)
            remaining, to_digest = stop - start, digested
            while remaining > 0:
                chunk = source.read(min(_CHUNK, remaining))
                if not chunk:
                    break
                if to_digest > 0:
                    value = zlib.crc32(chunk[:to_digest], value)
                    to_digest -= len(chunk)
                try:
                    sink.write(chunk)
                except OSError as error:
                    raise _Unwritable(f"{target}: {error.strerror or error}") from error
                remaining -= len(chunk)
            try:
                sink.flush()
            except OSError as error:
                raise _Unwritable(f"{target}: {error.strerror or error}") from error
    return value


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
        raise ReportError(f"results path {str(path)!r} is a folder, not a file")
    if cache_dir is None:
        return _uncached(con, path, table, settings)
    real = os.path.realpath(path)
    try:
        folder, lock = _locked_folder(Path(cache_dir), real, LOCK_TIMEOUT_S)
    except (OSError, Timeout) as error:
        log.warning("report cache unusable (%s): reading %s without it", error, path)
        return _in_memory(con, path, table)
    try:
        scan, _ = _open_cached(con, temp, path, real, folder, table)
        return scan
    finally:
        lock.release()


def _in_memory(con: Any, path: Path, table: str) -> FileScan:
    """The whole file parsed with its details, kept in memory only (no cache, and no
    scratch file needed later: `Engine.ensure_details` finds the details in `table`)."""
    parsed = eng.parse(con, path, table, terminated_bytes=path.stat().st_size, display=path, line_offset=0)
    return _scan_of(path, table, parsed)


def _scan_of(path: Path, table: str, parsed: eng.Parsed) -> FileScan:
    return eng.FileScan(path, f"({eng.rows_relation(table, 0)})", parsed.rows, parsed.bad,
                        sorted(parsed.unusable), parsed.provenance, False,
                        settings=_merged(parsed.settings, parsed.partial_settings))


def _locked_folder(cache_dir: Path, real: str, timeout: float) -> tuple[Path, FileLock]:
    """The cache's folder of the file at real path `real`, made if need be, and its lock, held."""
    folder = cache_dir / hashlib.sha256(os.fsencode(real)).hexdigest()[:24]
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(folder / "lock"), timeout=timeout)
    lock.acquire()
    return folder, lock


#: Bumped when meta.json's layout changes.
_FORMAT = 2


@dataclass
class _Cached:
    """What meta.json says was cached: the first `size` bytes of the file (CRC-32 `crc`),
    parsed into `rows` rows in `parts`, as the file was when its status was `status`."""

    status: list[int]
    racy: bool
    size: int
    crc: int
    rows: int
    lines: int
    parts: list[dict[str, Any]]
    bad: list[BadLine]
    unusable: list[int]
    provenance: dict[str, eng.Provenance]
    settings: list[tuple[str, int]]


def _duckdb_version() -> str:
    import duckdb

    return duckdb.__version__


def _read_meta(folder: Path) -> Optional[dict[str, Any]]:
    """meta.json, or None where there is none; _Damaged where it cannot be one."""
    try:
        text = (folder / "meta.json").read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise _Damaged(f"meta.json unreadable: {error.strerror or error}") from error
    try:
        meta = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise _Damaged("meta.json is no JSON") from error
    if not isinstance(meta, dict):
        raise _Damaged("meta.json is no JSON object")
    return meta


def _interpret(meta: dict[str, Any], path: Path, real: str) -> Optional[_Cached]:
    """The cache meta.json describes; None where another version wrote it (or for another
    file); _Damaged where a value is not what this version writes."""
    if (meta.get("format") != _FORMAT or meta.get("schema") != eng.SCHEMA_VERSION
            or meta.get("duckdb") != _duckdb_version() or meta.get("path") != real):
        return None
    try:
        status = [int(value) for value in meta["status"]]
        if len(status) != 5:
            raise ValueError("status")
        parts = [dict(part) for part in meta["parts"]]
        for part in parts:
            part["path"], part["bytes"], part["rows"] = str(part["path"]), int(part["bytes"]), int(part["rows"])
        cached = _Cached(
            status=status, racy=bool(meta["racy"]), size=int(meta["size"]), crc=int(meta["crc"]),
            rows=int(meta["rows"]), lines=int(meta["lines"]), parts=parts,
            bad=[BadLine(str(path), int(n), str(r)) for n, r in meta["bad"]],
            unusable=[int(n) for n in meta["unusable"]],
            provenance={str(k): eng.Provenance.from_dict(dict(v)) for k, v in meta["runs"].items()},
            settings=[(str(text), int(count)) for text, count in meta["settings"]])
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise _Damaged(f"meta.json holds values of the wrong shape ({type(error).__name__}: {error})") from error
    if min(cached.size, cached.rows, cached.lines, *(p["rows"] for p in parts)) < 0:
        raise _Damaged("meta.json's counts are negative")
    return cached


def _check_parts(con: Any, cached: _Cached) -> None:
    """_Damaged unless every Parquet part is whole: its size as written, and its footer
    read back with the rows it was written with."""
    import duckdb

    for part in cached.parts:
        try:
            size = os.stat(part["path"]).st_size
        except OSError as error:
            raise _Damaged(f"{part['path']}: {error.strerror or error}") from error
        if size != part["bytes"]:
            raise _Damaged(f"{part['path']} holds {size} bytes, not the {part['bytes']} written")
    if not cached.parts:
        return
    try:
        rows = con.execute(f"SELECT count(*) FROM read_parquet({_list([p['path'] for p in cached.parts])})").fetchone()[0]
    except (duckdb.Error, UnicodeError) as error:
        raise _Damaged(f"a Parquet part cannot be read ({str(error).splitlines()[0][:200]})") from error
    written = sum(part["rows"] for part in cached.parts)
    if rows != written:
        raise _Damaged(f"the Parquet parts hold {rows} rows, not the {written} written")


def _prefix_unchanged(cached: _Cached, path: Path, stat: os.stat_result) -> bool:
    """Whether the file still begins with the bytes cached: its status as recorded (taken
    when no edit could go unseen), else the same CRC-32 of those bytes."""
    status = _status(stat)
    if status[:2] != cached.status[:2] or stat.st_size < cached.size:
        return False
    if status == cached.status and not cached.racy:
        return True
    return _crc(path, cached.size) == cached.crc


def _clear(folder: Path) -> None:
    """Remove what the cache's folder holds, but its lock."""
    for entry in folder.iterdir():
        if entry.name == "lock":
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def _write_meta(folder: Path, meta: dict[str, Any]) -> None:
    temporary = folder / f"meta.{uuid.uuid4().hex}.tmp"
    try:
        temporary.write_text(json.dumps(meta), encoding="utf-8")
        os.replace(temporary, folder / "meta.json")
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise _Unwritable(f"meta.json: {error.strerror or error}") from error


def _write_part(con: Any, folder: Path, relation: str) -> dict[str, Any]:
    import duckdb

    part = folder / f"part-{uuid.uuid4().hex[:12]}.parquet"
    try:
        rows = con.execute(f"COPY ({relation}) TO {sql.quoted(str(part))} (FORMAT parquet)").fetchone()[0]
        size = part.stat().st_size
    except (duckdb.Error, OSError, UnicodeError) as error:
        part.unlink(missing_ok=True)
        raise _Unwritable(f"{part.name}: {str(error).splitlines()[0][:200]}") from error
    return {"path": str(part), "bytes": size, "rows": rows}


def _open_cached(con: Any, temp: Path, path: Path, real: str, folder: Path, table: str,
                 wait: bool = False) -> tuple[FileScan, bool]:
    """The file's scan, through the cache in `folder` (its lock held); and whether the cache
    now holds it. `wait`: a status too recent to trust is taken again a moment later."""
    stat, racy = _settled_stat(path, wait)
    cached: Optional[_Cached] = None
    try:
        meta = _read_meta(folder)
        if meta is not None:
            cached = _interpret(meta, path, real)
        if cached is not None:
            _check_parts(con, cached)
    except _Damaged as damage:
        log.warning("the reports' cache of %s was damaged (%s): it is built again", path, damage)
        cached = None
    if cached is not None and _prefix_unchanged(cached, path, stat):
        return _extend(con, temp, path, real, folder, table, stat, racy, cached)
    return _build(con, path, real, folder, table, stat, racy)


def _meta(real: str, stat: os.stat_result, racy: bool, size: int, crc: int, rows: int, lines: int,
          parts: list[dict[str, Any]], bad: list[BadLine], unusable: list[int],
          provenance: dict[str, eng.Provenance], settings: list[tuple[str, int]]) -> dict[str, Any]:
    return {
        "format": _FORMAT, "schema": eng.SCHEMA_VERSION, "duckdb": _duckdb_version(), "path": real,
        "status": _status(stat), "racy": racy, "size": size, "crc": crc, "rows": rows,
        "lines": lines, "parts": parts,
        # Bad lines in the unterminated last line are reported but not kept in the cache.
        "bad": [[b.lineno, b.reason] for b in bad if b.lineno <= lines],
        "unusable": [n for n in unusable if n <= lines],
        "runs": {k: v.to_dict() for k, v in provenance.items()},
        "settings": [[text, count] for text, count in settings],
    }


def _build(con: Any, path: Path, real: str, folder: Path, table: str, stat: os.stat_result,
           racy: bool) -> tuple[FileScan, bool]:
    """Parse the whole file and cache it (unless it changed while it was read, or the
    cache cannot be written: then it is read from memory alone)."""
    try:
        _clear(folder)
    except OSError as error:
        log.warning("the reports' cache of %s cannot be cleared (%s): read without it", path, error)
        return _in_memory(con, path, table), False
    terminated = _terminated_size(path, stat.st_size)
    parsed = eng.parse(con, path, table, terminated_bytes=terminated, display=path, line_offset=0,
                    digest=terminated)
    scan = _scan_of(path, table, parsed)
    if parsed.crc is None or _status(os.stat(path)) != _status(stat):
        log.info("%s changed while it was read: not cached this time", path)
        return scan, False
    try:
        part = _write_part(con, folder, eng.rows_relation(table, 0, below=parsed.terminated_rows))
        _write_meta(folder, _meta(real, stat, racy, terminated, parsed.crc, parsed.terminated_rows,
                                  parsed.lines, [part], parsed.bad, parsed.unusable, parsed.provenance,
                                  parsed.settings))
    except _Unwritable as error:
        log.warning("the reports' cache cannot be written (%s): %s is read without it", error, path)
        _clear_quietly(folder)
        return scan, False
    return scan, True


def _clear_quietly(folder: Path) -> None:
    try:
        _clear(folder)
    except OSError:
        pass


def _extend(con: Any, temp: Path, path: Path, real: str, folder: Path, table: str,
            stat: os.stat_result, racy: bool, cached: _Cached) -> tuple[FileScan, bool]:
    """The cached rows, and those of what was appended since (parsed, and cached where the
    cache can be written)."""
    size = stat.st_size
    terminated = _terminated_size(path, size)
    parts, rows, lines, crc = list(cached.parts), cached.rows, cached.lines, cached.crc
    bad, unusable, provenance = list(cached.bad), list(cached.unusable), dict(cached.provenance)
    settings, partial_settings = cached.settings, []
    relations: list[str] = []
    total, writable = rows, True
    if size > cached.size:
        tail = temp / f"{table}.tail.jsonl"
        try:
            crc = _copy_range(path, cached.size, size, tail, terminated - cached.size, crc)
        except _Unwritable as error:
            log.warning("the reports' scratch file cannot be written (%s): %s is read without "
                        "its cache", error, path)
            tail.unlink(missing_ok=True)
            return _in_memory(con, path, table), False
        parsed = eng.parse(con, tail, table, terminated_bytes=terminated - cached.size,
                        display=path, line_offset=lines)
        tail.unlink(missing_ok=True)
        kept_from = 0
        if parsed.terminated_rows:
            try:
                parts.append(_write_part(con, folder, eng.rows_relation(table, rows, below=parsed.terminated_rows)))
                kept_from = parsed.terminated_rows
            except _Unwritable as error:
                log.warning("the reports' cache cannot be written (%s): what was appended to %s "
                            "is read without it", error, path)
                writable = False
        relations.append(eng.rows_relation(table, rows, at_least=kept_from))
        bad += parsed.bad
        unusable += parsed.unusable
        for run, prov in parsed.provenance.items():
            provenance.setdefault(run, prov)
        settings = _merged(settings, parsed.settings)
        partial_settings = parsed.partial_settings
        rows += parsed.terminated_rows
        lines += parsed.lines
        total = rows + (parsed.rows - parsed.terminated_rows)
    if writable and len(parts) > MAX_PARTS:
        try:
            merged = _write_part(con, folder, f"SELECT * FROM read_parquet({_list([p['path'] for p in parts])})")
        except _Unwritable as error:
            log.info("the reports' cache's parts not merged: %s", error)
        else:
            for old in parts:
                Path(old["path"]).unlink(missing_ok=True)
            parts = [merged]
    cached_parts = parts if writable else cached.parts
    relations.insert(0, f"SELECT * FROM read_parquet({_list([p['path'] for p in cached_parts])})")
    if writable:
        new_meta = _meta(real, stat, racy, terminated, crc, rows, lines, parts, bad, unusable,
                         provenance, settings)
        try:
            _write_meta(folder, new_meta)
        except _Unwritable as error:
            log.warning("the reports' cache cannot be written (%s): what was appended to %s "
                        "is read without it", error, path)
            writable = False
    relation = "(" + " UNION ALL ".join(relations) + ")"
    return (eng.FileScan(path, relation, total, bad, sorted(unusable), provenance, True,
                         settings=_merged(settings, partial_settings)), writable)


def refresh(path: Path, cache_dir: Optional[Path] = None) -> bool:
    """Bring the cache of results file `path` up to date, as a report reading it would:
    parse what was appended since it was last cached (all of it the first time) and keep
    it. Returns whether the cache was brought up to date (not when a report holds it, or it
    cannot be made or written). The runner calls it once a sweep has appended its lines
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
            # The sweep has just written the file: its status is taken once the clock moved on.
            _, kept = _open_cached(con, temp, path, real, folder, "refreshed", True)
        finally:
            con.close()
    finally:
        lock.release()
        shutil.rmtree(temp, ignore_errors=True)
    return kept


def _list(paths: list[str]) -> str:
    return "[" + ", ".join(sql.quoted(p) for p in paths) + "]"


def clear(cache_dir: Path) -> None:
    """Remove the whole cache folder (tests, or a user who wants the space back)."""
    shutil.rmtree(cache_dir, ignore_errors=True)
