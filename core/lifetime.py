"""How a process of the runner ends with the one that started it (a forked or spawned child,
a fork server)."""

from __future__ import annotations

import logging
import signal
import sys

log = logging.getLogger(__name__)


def die_with_parent() -> None:
    """Ask Linux to kill this child when the runner dies (a SIGKILLed runner leaves no
    orphan experiment behind), and to adopt its orphaned descendants, so that killing this
    child's tree finds them too (the runner's guard kills them if the runner dies).
    Elsewhere this is a no-op."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1)
    except (OSError, AttributeError):
        log.debug("could not ask to die with the parent")
