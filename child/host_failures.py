"""Whose failure an exception in the child is: the experiment's, or the host's.

A failure of the host says nothing about the experiment, and resume runs the experiment again
(its line's `failure_kind` is `infrastructure`): recorded as the experiment's own, every
experiment of a sweep on a full TMPDIR stayed failed for good. The host's failures are:

- the disk or a limit of the host refused a write or a file: no space left (ENOSPC), a quota
  (EDQUOT), a file-size limit (EFBIG), a read-only filesystem (EROFS), too many open files
  (EMFILE, ENFILE); found in the exception or anything in its chain of causes, or, for
  libraries that turn such an error into text (torch's C++ errors), the system's own words
  for it in their messages;
- a warning raised as an error: only a warnings filter set to "error" raises a Warning, and
  that filter is the user's environment (PYTHONWARNINGS=error, a sitecustomize), not the
  experiment. The runner does not pass PYTHONWARNINGS to its children (third-party
  deprecation warnings, torch's TF32 one among them, made every experiment fail); a filter
  set another way still counts as the host's.
"""

from __future__ import annotations

import errno
import os
from typing import Optional

#: The errors of a host's disk or limits, not of an experiment.
HOST_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EMFILE,
               errno.ENFILE)
#: How many links of an exception's chain of causes are looked at.
MAX_CHAIN = 20


def host_cause(error: BaseException) -> Optional[str]:
    """Why `error` is the host's failure (a sentence), or None when it is the experiment's."""
    seen = 0
    current: Optional[BaseException] = error
    while current is not None and seen < MAX_CHAIN:
        if isinstance(current, Warning):
            return (f"a warnings filter turned a warning into an error ({type(current).__name__});"
                    " it is the environment's setting, not the experiment's")
        if isinstance(current, OSError) and current.errno in HOST_ERRNOS:
            return f"the host refused a file operation: {os.strerror(current.errno)}"
        text = str(current)
        for number in HOST_ERRNOS:
            if os.strerror(number) in text:
                return f"the host refused a file operation: {os.strerror(number)}"
        current = current.__cause__ or current.__context__
        seen += 1
    return None
