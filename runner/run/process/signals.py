"""How the runner stops: SIGTERM and SIGHUP behave like Ctrl-C, and short critical sections
(an append and its claim) finish before any of them is acted upon.

Ctrl-C raises `KeyboardInterrupt` (Python's default); SIGTERM and SIGHUP raise
`Terminated`, a `KeyboardInterrupt` too, so every cleanup written for Ctrl-C (killing the
running child's tree, releasing its claim, keeping the finished lines) serves them all.
The exit status is 128 + the signal's number: 130, 143, 129.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator, Optional

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """The runner was asked to stop by a signal other than SIGINT."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_terminated(signum: int, _frame) -> None:
    raise Terminated(signum)


def install() -> None:
    """Make SIGTERM and SIGHUP stop the runner the way Ctrl-C does (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_terminated)


def signal_number(interruption: BaseException) -> int:
    """The signal behind a KeyboardInterrupt (SIGINT unless it is a `Terminated`)."""
    return getattr(interruption, "signum", signal.SIGINT)


def exit_status(interruption: BaseException) -> int:
    """The shell's convention for a process stopped by a signal: 128 + its number."""
    return 128 + signal_number(interruption)


def signal_name(interruption: BaseException) -> str:
    return signal.Signals(signal_number(interruption)).name


def describe(interruption: BaseException) -> str:
    """'interrupted (SIGINT)', 'terminated (SIGTERM)' or 'hung up (SIGHUP)'."""
    number = signal_number(interruption)
    verb = {signal.SIGINT: "interrupted", signal.SIGHUP: "hung up"}.get(number, "terminated")
    return f"{verb} ({signal_name(interruption)})"


def _interruption(signum: int) -> KeyboardInterrupt:
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP while the block runs, then act on the first one.

    For short sections that must not stop halfway (an append and its claim's release).
    Outside the main thread, where Python runs no handler, it changes nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    for signum in STOP_SIGNALS:
        signal.signal(signum, lambda number, _frame: received.append(number))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        first: Optional[int] = received[0] if received else None
    if first is not None:
        raise _interruption(first)
