"""Side files: the JSON files a runner keeps beside its results (the claims file, the
reference workload's history, the probe's cached answer, the workload cache).

Every one of them is untrusted input: a cache folder is shared by versions, copied between
hosts, filled by disks that run full and edited by hand. Each is read through
`read_side_file` with a declared shape (a function that returns the value as the caller
uses it, or raises `ShapeError` naming what does not fit). A file that cannot be read as
JSON, or does not fit its shape, is set aside (renamed to `<name>.unreadable`, replacing an
earlier one) with a warning that names it; the caller starts it afresh. Reading one never
raises but for the file's shape being the caller's bug.

Every side file is opened by `read_regular_file`, which never blocks and never loops: it
opens without waiting (O_NONBLOCK: a FIFO with no writer would otherwise hang the runner in
`open`, inside the results file's lock with its signals deferred) and reads only a regular
file. A FIFO, a socket or a device in a side file's place does not fit, nor does a symbolic
link that loops (ELOOP): each is set aside like any file that does not fit (the link or the
FIFO itself is renamed; nothing is read from it).
"""

from __future__ import annotations

import errno
import logging
import math
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Generic, Mapping, Optional, TypeVar

from core.files import strict_json

log = logging.getLogger(__name__)

T = TypeVar("T")

#: A side file holds a few kilobytes; anything this large is not one.
MAX_SIDE_FILE_BYTES = 8 * 2**20
SET_ASIDE_SUFFIX = ".unreadable"


class ShapeError(ValueError):
    """A side file's content does not fit its declared shape."""


@dataclass(frozen=True)
class SideRead(Generic[T]):
    """A side file's value (None when absent or set aside) and the warning, if any."""

    value: Optional[T] = None
    warning: Optional[str] = None


class NotARegularFile(OSError):
    """A path that names something other than a regular file (a FIFO, a socket, a device, a
    folder): nothing is read from it."""

    def __init__(self, path: Path, kind: str) -> None:
        super().__init__(errno.EINVAL, f"{kind}, not a regular file", str(path))
        self.kind = kind


def file_kind(mode: int) -> str:
    """What a stat mode names, in words ("a FIFO", "a folder", ...)."""
    for test, kind in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return kind
    return "a regular file" if stat.S_ISREG(mode) else "not a file"


def read_regular_file(path: Path, max_bytes: int) -> bytes:
    """At most `max_bytes + 1` bytes of the regular file at `path`, read without ever
    blocking: opened non-blocking (a FIFO's open returns at once), then checked with fstat
    before anything is read. NotARegularFile for anything but a regular file; OSError as
    `open` raises it otherwise (FileNotFoundError; ELOOP for a symbolic link that loops)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as error:
        if error.errno in (errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):  # a socket, a device
            mode = os.stat(path).st_mode
            if not stat.S_ISREG(mode):
                raise NotARegularFile(path, file_kind(mode)) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFile(path, file_kind(mode))
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 2**20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_side_file(path: Path, shape: Callable[[Any], T], what: str,
                   max_bytes: int = MAX_SIDE_FILE_BYTES, constants: bool = False) -> SideRead[T]:
    """The value of the JSON side file at `path` as `shape` makes it; `what` names the file
    in the warning ("the claims file"). An absent file gives SideRead(None); a file that
    does not fit (a FIFO, a folder or a symbolic link loop in its place included) is set
    aside and gives SideRead(None, warning), the warning also logged. NaN and Infinity do
    not fit, unless `constants` lets `shape` judge them. Never blocks (`read_regular_file`)."""
    try:
        data = read_regular_file(path, max_bytes)
    except FileNotFoundError:
        return SideRead()
    except NotARegularFile as error:
        return SideRead(None, _set_aside(path, what, error.strerror))
    except OSError as error:
        if error.errno == errno.ELOOP:
            return SideRead(None, _set_aside(path, what, "a symbolic link that loops"))
        warning = f"{what} {path} cannot be read ({error.strerror or error}); it is not used"
        log.warning("%s", warning)
        return SideRead(None, warning)
    try:
        if len(data) > max_bytes:
            raise ShapeError(f"larger than {max_bytes} bytes")
        value = shape(strict_json.loads(data.decode("utf-8"), constants=constants))
    except (ValueError, RecursionError) as error:  # ShapeError, JSON's and UTF-8's errors
        reason = "nested too deeply" if isinstance(error, RecursionError) else str(error)
        return SideRead(None, _set_aside(path, what, reason[:200]))
    return SideRead(value)


def _set_aside(path: Path, what: str, reason: str) -> str:
    aside = path.with_name(path.name + SET_ASIDE_SUFFIX)
    try:
        if aside.is_dir() and not aside.is_symlink():
            shutil.rmtree(aside)  # an earlier one of another kind: a folder cannot be replaced
        elif path.is_dir() and aside.exists():
            aside.unlink()
        os.replace(path, aside)
        done = f"set aside as {aside.name} and rebuilt"
    except FileNotFoundError:  # another runner set it aside first
        done = "set aside by another runner and rebuilt"
    except OSError as error:
        done = f"not used (it could not be set aside: {error.strerror or error})"
    warning = f"{what} {path} does not fit its shape ({reason}); {done}"
    log.warning("%s", warning)
    return warning


# Small shape checks the side files' shapes are made of.

def an_object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ShapeError(f"{where} is {type(value).__name__}, not a JSON object")
    return value


def a_list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ShapeError(f"{where} is {type(value).__name__}, not a list")
    return value


def a_string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ShapeError(f"{where} is {type(value).__name__}, not a string")
    return value


def an_optional_string(value: Any, where: str) -> Optional[str]:
    return None if value is None else a_string(value, where)


def a_bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ShapeError(f"{where} is {type(value).__name__}, not true or false")
    return value


def a_number(value: Any, where: str) -> float:
    """A finite JSON number (a boolean is none)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ShapeError(f"{where} is {type(value).__name__}, not a number")
    if not math.isfinite(value):
        raise ShapeError(f"{where} is {value}, not a finite number")
    return float(value)


def strings(value: Any, where: str) -> list[str]:
    return [a_string(item, f"{where}[{index}]") for index, item in enumerate(a_list(value, where))]


def string_map(value: Any, where: str) -> dict[str, str]:
    return {key: a_string(item, f"{where}.{key}") for key, item in an_object(value, where).items()}
