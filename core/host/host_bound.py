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

The span cannot see host work that the device waits for after it reached the first event:
with CUDA graphs the host checks guards and prepares the replay while the device, already
past the event, sits idle, and that idle time counts as the device's. So a line is also
host-bound when the card was busy (its kernels' time per iteration, `device_busy_ms`) for
less than 1 - `HOST_SHARE_BOUND` of its time per iteration: `host_share`, the host's part,
which the host's speed moves (`summary.host_bound_by` says which rule flagged it).
"""

from __future__ import annotations

from typing import Any, MutableMapping, Optional, Sequence

#: Enqueue time over device span at which an iteration counts as host-bound.
HOST_BOUND_RATIO = 0.9
#: The share of host-bound iterations beyond which a line is flagged.
LINE_BOUND = 0.5
#: The host's share of an iteration from which a line is host-bound too. On an H200,
#: mobilevit_s at batch 2 with CUDA graphs (the card busy 0.58 ms of 1.05 to 1.63: a share of
#: 45 to 64%, no iteration host-bound by its span) moved 18% between two invocations with the
#: host's pulse; vit_base_patch16_siglip_256 at batch 128 (a share of 7 to 10%) moved 0.6%.
HOST_SHARE_BOUND = 0.2


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


def host_share(device_busy_ms: Any, latency_s: Optional[float]) -> Optional[float]:
    """The share of an iteration the card was not busy: 1 - its busy time over the time per
    iteration (None without both)."""
    if not isinstance(device_busy_ms, (int, float)) or device_busy_ms <= 0 or not latency_s:
        return None
    return max(0.0, 1.0 - device_busy_ms / (latency_s * 1e3))


def judge_host_share(summary: MutableMapping[str, Any], latency_s: Optional[float]) -> None:
    """Record the line's `host_share` and flag it host-bound where the share reaches
    `HOST_SHARE_BOUND` (`host_bound_by`: "iterations" or "host share")."""
    share = host_share(summary.get("device_busy_ms"), latency_s)
    if share is None:
        return
    summary["host_share"] = share
    if summary.get("host_bound"):
        summary["host_bound_by"] = "iterations"
    elif share >= HOST_SHARE_BOUND:
        summary["host_bound"] = True
        summary["host_bound_by"] = "host share"
