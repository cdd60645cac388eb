"""The error types of the reports package."""

from __future__ import annotations

from typing import Any


class ReportError(RuntimeError):
    """Input a report cannot be made from; the message names the offending value."""


class MachineError(RuntimeError):
    """The machine could not do what a report needs (a full disk, a file-size limit): not
    the input's fault; the message says what failed and where."""


class ScratchError(MachineError):
    """A scratch file of the reports could not be written."""

    def __init__(self, folder: Any, error: OSError) -> None:
        super().__init__(f"cannot write the reports' scratch files in {str(folder)!r}: "
                         f"{error.strerror or error}; free some space there or set TMPDIR "
                         "to a folder with room")
