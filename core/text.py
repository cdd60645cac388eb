"""Text that users gave (paths, model names, lines of a results file) made safe to print.

A model name or a path can hold anything a file name can: a newline or a carriage return
that forges a console line ("INFO: all passed"), an escape sequence that recolours or
clears the terminal, a bidirectional override that shows text in another order than it
reads, or bytes that are no UTF-8 (a path decoded with `surrogateescape`), which `print`
refuses. `printable` shows each of those as an escape (`\\n`, `\\x1b`, `\\u202e`, `\\xff`)
and leaves every other character as it is.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any, Mapping

#: Characters shown escaped: C0 and C1 controls, DEL, the bidirectional marks, embeddings,
#: overrides and isolates, the line and paragraph separators, the byte-order mark, and the
#: lone surrogates that stand for bytes of a name that are no UTF-8.
_UNPRINTABLE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: "re.Match[str]") -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was no UTF-8 (os.fsdecode's surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(value: Any) -> str:
    """`value` as text a console shows as it is (one line, in reading order): control
    characters, bidirectional controls and undecodable bytes escaped."""
    if isinstance(value, bytes):
        value = os.fsdecode(value)
    text = value if isinstance(value, str) else str(value)
    return _UNPRINTABLE.sub(_escape, text)


class PrintableFormatter(logging.Formatter):
    """A log formatter that makes the record's arguments printable (`printable`): a path or
    a model name logged as `%s` cannot forge a console line; the message's own text (the
    program's) and tracebacks are left as they are."""

    def format(self, record: logging.LogRecord) -> str:
        args = record.args
        if args:
            record = logging.makeLogRecord(record.__dict__)
            if isinstance(args, Mapping):
                record.args = {key: _printable_arg(value) for key, value in args.items()}
            else:
                record.args = tuple(_printable_arg(value) for value in args)
        return super().format(record)


def _printable_arg(value: Any) -> Any:
    if isinstance(value, (str, bytes, os.PathLike)):
        return printable(os.fspath(value) if isinstance(value, os.PathLike) else value)
    return value
