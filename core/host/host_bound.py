"""Host-bound iterations: did the device sit waiting for the host? (pure: the child judges
its iterations, the parent combines processes' counts with the same rule)

On a device that runs work queued by the host (CUDA), each timed iteration is bracketed by
two device events recorded on the stream (`DeviceTimer`), and the host clock times how
long the host took to queue it (its enqueue time). The device span runs from the moment
the device reached the first event to the moment it finished the iteration's work; it
cannot end before the host queued the last of it. So the device's lead, span less
enqueue, is how long the device's work outlasted the host's queuing:

- a device-bound iteration has a large lead: the host queued everything early, the device
  then worked through its queue;
- a host-bound iteration has almost none: the device finished each piece of work before
  the host queued the next, and waited for it.

An iteration is host-bound when its enqueue time is at least `HOST_BOUND_RATIO` of its
device span (its lead under 10% of the span). A line is flagged (`summary.host_bound`) when
more than `LINE_BOUND` of its timed iterations are.
"""

from __future__ import annotations

from typing import Any, Sequence

#: Enqueue time over device span at which an iteration counts as host-bound.
HOST_BOUND_RATIO = 0.9
#: The share of host-bound iterations beyond which a line is flagged.
LINE_BOUND = 0.5


def is_host_bound(device_span: float, enqueue: float, ratio: float = HOST_BOUND_RATIO) -> bool:
    """Whether one iteration's device sat waiting for its host (see the module's doc)."""
    return device_span > 0 and enqueue >= ratio * device_span


def host_bound_summary(device_spans: Sequence[float], enqueue_times: Sequence[float],
                       ratio: float = HOST_BOUND_RATIO,
                       line_bound: float = LINE_BOUND) -> dict[str, Any]:
    """The line's host-bound figures from each timed iteration's device span and enqueue
    time (pairs in order): how many were host-bound, the fraction, and the flag."""
    pairs = [(span, enqueue) for span, enqueue in zip(device_spans, enqueue_times) if span > 0]
    flagged = sum(is_host_bound(span, enqueue, ratio) for span, enqueue in pairs)
    return host_bound_counts(flagged, len(pairs), ratio, line_bound)


def host_bound_counts(flagged: int, judged: int, ratio: float = HOST_BOUND_RATIO,
                      line_bound: float = LINE_BOUND) -> dict[str, Any]:
    """The line's host-bound figures from its counts: `flagged` host-bound iterations of
    `judged` (summed over processes, for a line of several)."""
    fraction = flagged / judged if judged else None
    return {
        "host_bound": bool(fraction is not None and fraction > line_bound),
        "host_bound_fraction": fraction,
        "host_bound_iterations": flagged,
        "host_bound_judged": judged,
        "host_bound_ratio": ratio,
        "host_bound_line_bound": line_bound,
    }
