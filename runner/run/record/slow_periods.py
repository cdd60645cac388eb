"""Slow periods: was the machine itself slow while an experiment was measured? (parent side)

Every timing process times a short fixed reference workload before and after its timed runs
(child/reference.py: a host-side launch loop and a device kernel). This module keeps
each host's usual figures for it, per device, in the cache folder beside the probe's
(`core.host.machine.cache_root()/reference`): the latest `HISTORY` readings of each figure, a week
at most. The usual figure is their median, once there are `MIN_HISTORY` of them.

How slow a process ran is, for the figure that ran slowest against its usual value, the
lesser of its readings before and after the timed runs: a slow period over the process
slows both, while one reading caught by a moment's noise does not count. The host pulse
(`host_ms`) is read during the timed runs, once after each, and its reading is already their
median. The line's ratio is the median of its processes' ratios (its figure is their median
too). A line is flagged
(`summary.slow_period.flagged`, and `summary.unreliable` with the reason) when its ratio is
above `SLOW_BOUND`, or (CUDA) when `SLOW_SHARE_BOUND` of its timed runs or more followed a
slow host pulse (`summary.slow_period.slow_share`); the ratio is recorded either way. Every reading joins the history after the line is judged, so
the usual figure follows a lasting change of the machine within `HISTORY / 2` experiments,
while a slow period shorter than that stands out.

**Waiting for the fast state** (`FastStateWait`, with --remeasure-slow). On the lent GPU
hosts a slow period of the whole machine lasted one to two minutes, long enough to cover an
attempt made at once too. So before measuring a flagged line again the runner reads the host
pulse itself (the child's fixed Python loop) about once a second, and submits the experiment
once `FAST_READS` reads in a row are within the line's fast bound
(`summary.pulse_states.fast_bound_ms`), or once --slow-wait seconds have passed; the next
line kept says what each wait found (`summary.slow_period.fast_state_waits`).
"""

from __future__ import annotations

import logging
import math
import re
import socket
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional

from core.figures import median_time
from core.host.host_bound import host_share
from core.host.machine import cache_root
from core.host.host_state import FAST_BOUND_OVER_LOW, host_pulse, low_pulse, pulse_states
from core.files.cached_json import write_json_atomically
from core.files.side_files import ShapeError, a_list, a_number, an_object, read_side_file

log = logging.getLogger(__name__)

#: A reading this many times the usual figure flags the line.
SLOW_BOUND = 1.3
#: A line whose timed runs followed a slow host pulse this often, against the fast state the
#: host's history knows (core/host/host_state.py: `pulse_states`), is flagged too: it was
#: timed in a slow period of the machine, whatever the usual (median) pulse has drifted to.
SLOW_SHARE_BOUND = 0.75
#: ...on CUDA, where the host's launching sets a host-bound line's pace and its states were
#: measured (docs/timing.md). On the CPU a loaded machine's pulses read slow with the timed
#: work's contention, which the contention flags and the CPU time judge there.
SLOW_SHARE_DEVICE = "cuda"
#: ...and only on a host-bound line (core/host/host_bound.py: by its iterations, or by the
#: host's share of them): a slow host cannot move a figure the card sets. On an H200,
#: vit_base_patch16_siglip_256 at batch 128 (the card busy 92% of each iteration) read 0.6%
#: apart in two invocations whose host pulses read 1.16 and 0.67 ms.
#: Readings kept per figure, and the fewest that make a usual figure.
HISTORY = 50
MIN_HISTORY = 3
MAX_AGE_SECONDS = 7 * 24 * 3600
#: The reference's figures (child/reference.py), with what each measures.
FIGURES = {"launch_us": "the host's launch loop", "kernel_ms": "the device kernel",
           "host_ms": "the host pulse during the timed runs"}
#: Where a process's reference keeps its readings: around its timed runs, and during them.
READING_KEYS = ("before", "after", "during")
#: The range a figure (microseconds or milliseconds) can hold: a reading below a picosecond
#: or above a week is no reading of the reference, and a ratio of two figures in this
#: range stays a finite number (at most 1e24).
MIN_READING, MAX_READING = 1e-12, 1e12


def processes_of(summary: Mapping[str, Any]) -> list[list[dict[str, Any]]]:
    """The reference readings of a line's summary: for each process, those taken before and
    after its timed runs, and the one made of its host pulses during them."""
    references = summary.get("reference_processes")
    if not isinstance(references, list):
        references = [summary.get("reference")]
    found = []
    for reference in references:
        if isinstance(reference, dict):
            readings = [reading for reading in map(reference.get, READING_KEYS)
                        if isinstance(reading, dict)]
            if readings:
                found.append(readings)
    return found


def readings_of(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every reference reading of a line's summary."""
    return [reading for readings in processes_of(summary) for reading in readings]


def process_ratio(readings: list[dict[str, Any]],
                  usual: Mapping[str, float]) -> Optional[tuple[float, str]]:
    """How slow one process ran, and by which figure: for each figure the lesser ratio of
    its readings (before, after; the host pulse has one, during) to the usual value; the
    largest of those."""
    ratios = []
    for name, value in usual.items():
        measured = [reading[name] for reading in readings if _usable(reading.get(name))]
        if measured and _usable(value):
            ratio = min(measured) / value
            if math.isfinite(ratio):
                ratios.append((ratio, name))
    return max(ratios) if ratios else None


def _usable(value: Any) -> bool:
    """A figure a ratio can be made of: a number from MIN_READING to MAX_READING."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and MIN_READING <= value <= MAX_READING)


@dataclass
class SlowVerdict:
    """How slow the reference ran against the usual figure, and whether that flags the line."""

    ratio: Optional[float]
    flagged: bool
    figure: Optional[str] = None
    usual: dict[str, float] = field(default_factory=dict)
    readings: int = 0
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"ratio": self.ratio, "flagged": self.flagged, "figure": self.figure,
                "usual": self.usual, "readings": self.readings, "bound": SLOW_BOUND,
                "reason": self.reason}


def judge(processes: list[list[dict[str, Any]]], usual: Mapping[str, Optional[float]],
          bound: float = SLOW_BOUND) -> SlowVerdict:
    """Compare each process's readings with the usual figures; the median of the processes'
    ratios decides (see the module's doc)."""
    count = sum(len(readings) for readings in processes)
    if not count:
        return SlowVerdict(None, False, reason="no reference was measured")
    known = {name: value for name, value in usual.items() if _usable(value)}
    if not known:
        return SlowVerdict(None, False, readings=count,
                           reason=f"no usual figure for this host yet (fewer than {MIN_HISTORY} "
                                  "readings)")
    ratios = sorted(found for readings in processes
                    if (found := process_ratio(readings, known)) is not None)
    if not ratios:
        return SlowVerdict(None, False, readings=count, reason="no comparable figure")
    ratio, figure = ratios[(len(ratios) - 1) // 2]  # the median (the lower one of two)
    flagged = ratio > bound
    reason = (f"slow period: the reference ({FIGURES[figure]}) ran {ratio:.2f}x this host's "
              f"usual figure (bound {bound:.2f}x)") if flagged else ""
    return SlowVerdict(ratio, flagged, figure, dict(known), count, reason)


def history_key(device: str, accelerator_model: Optional[str]) -> str:
    """A file name for this host's figures on one device model (and thread count)."""
    text = f"{socket.gethostname()}-{device}-{accelerator_model or 'unknown'}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:150]


#: How far in the future a reading's stamp may lie (clocks of one host step a little).
FUTURE_SLACK_SECONDS = 60.0


def usual_figures(data: Mapping[str, Any], now: Optional[float] = None) -> dict[str, Optional[float]]:
    """The median of each figure's readings younger than MAX_AGE_SECONDS (None with fewer
    than MIN_HISTORY). A reading stamped in the future (the clock was set back since) is
    no reading of this period: it is left out, and dropped when the history is next kept."""
    now = time.time() if now is None else now
    usual: dict[str, Optional[float]] = {}
    for name in FIGURES:
        values = [value for stamp, value in data.get(name, []) if _recent(stamp, now)]
        usual[name] = statistics.median(values) if len(values) >= MIN_HISTORY else None
    return usual


def host_low_pulse(data: Mapping[str, Any], now: Optional[float] = None) -> Optional[float]:
    """The host's low pulse (core/host/pulse_states.py): the 10th percentile of its recent
    per-process pulses, None with fewer than MIN_HISTORY of them."""
    now = time.time() if now is None else now
    values = [value for stamp, value in data.get("host_ms", []) if _recent(stamp, now)]
    return low_pulse(values) if len(values) >= MIN_HISTORY else None


def _recent(stamp: float, now: float) -> bool:
    return -FUTURE_SLACK_SECONDS <= now - stamp < MAX_AGE_SECONDS


def history_shape(data: Any) -> dict[str, list[list[float]]]:
    """The history file's shape: {figure: [[stamp, value], ...]}, stamps finite numbers,
    values from MIN_READING to MAX_READING (5e-324 is finite and above zero, and no reading:
    the ratio of a reading to it overflows). Figures this version does not know are left out (a newer
    version may keep more)."""
    history = {}
    for name, readings in an_object(data, "the file").items():
        if name not in FIGURES:
            continue
        kept = []
        for index, reading in enumerate(a_list(readings, name)):
            where = f"{name}[{index}]"
            pair = a_list(reading, where)
            if len(pair) != 2:
                raise ShapeError(f"{where} holds {len(pair)} items, not [stamp, value]")
            stamp, value = a_number(pair[0], f"{where}'s stamp"), a_number(pair[1], f"{where}'s value")
            if not MIN_READING <= value <= MAX_READING:
                raise ShapeError(f"{where}'s value is {value}, not from {MIN_READING:g} to "
                                 f"{MAX_READING:g}")
            kept.append([stamp, value])
        history[name] = kept
    return history


class ReferenceHistory:
    """This host's recent reference readings per device, in the cache folder (thread-safe
    within a runner; runners sharing a host replace the file atomically, and at worst
    one's readings are lost)."""

    def __init__(self, folder: Optional[Path] = None) -> None:
        self.folder = Path(folder) if folder is not None else cache_root() / "reference"
        self._lock = threading.Lock()

    def _path(self, device: str, accelerator_model: Optional[str]) -> Path:
        return self.folder / f"{history_key(device, accelerator_model)}.json"

    def _read(self, path: Path) -> tuple[dict[str, list[list[float]]], Optional[str]]:
        """The history at `path`, and the warning when it did not fit: it is then set aside
        and starts afresh."""
        read = read_side_file(path, history_shape, "the reference workload's history")
        return read.value or {}, read.warning

    def usual(self, device: str, accelerator_model: Optional[str]) -> dict[str, Optional[float]]:
        """The median of each figure's recent readings (None with too few)."""
        return usual_figures(self._read(self._path(device, accelerator_model))[0])

    def add(self, device: str, accelerator_model: Optional[str],
            readings: Iterable[Mapping[str, Any]]) -> None:
        """Keep the readings (the latest HISTORY per figure); a failed write is only logged."""
        path = self._path(device, accelerator_model)
        with self._lock:
            self._keep(path, self._read(path)[0], readings)

    def _keep(self, path: Path, data: dict[str, Any], readings: Iterable[Mapping[str, Any]]) -> None:
        now = time.time()
        data = {name: [pair for pair in values if _recent(pair[0], now)]
                for name, values in data.items() if name in FIGURES}
        for reading in readings:
            for name in FIGURES:
                if _usable(reading.get(name)):
                    data.setdefault(name, []).append([now, float(reading[name])])
        data = {name: values[-HISTORY:] for name, values in data.items()}
        try:
            write_json_atomically(path, data)
        except OSError as error:
            log.debug("the reference readings were not kept: %s", error)

    def judge_summary(self, summary: dict[str, Any], accelerator_model: Optional[str],
                      metrics: Optional[Mapping[str, Any]] = None) -> list[str]:
        """Judge a line's summary against this host's usual figures, record the verdict
        (`summary.slow_period`, and the unreliable flag with its reason), then keep its
        readings. With the line's `metrics`, also its figure in each of the host's states
        (`summary.pulse_states`, against the host's low pulse before this line's joined).
        Returns the warnings of a history that did not fit (set aside), for the line's
        notes."""
        processes = processes_of(summary)
        readings = [reading for each in processes for reading in each]
        if not readings:
            return []
        device = str(readings[0].get("device") or "unknown")
        if readings[0].get("threads"):
            device += f"-t{readings[0]['threads']}"
        path = self._path(device, accelerator_model)
        with self._lock:  # one read of the history: judged by it, then kept in it
            data, warning = self._read(path)
            verdict = judge(processes, usual_figures(data))
            host_low = host_low_pulse(data)
            self._keep(path, data, readings)
        summary["slow_period"] = verdict.to_dict()
        reasons = [verdict.reason] if verdict.flagged else []
        states = pulse_states(metrics, summary, host_low) if metrics is not None else None
        if states is not None:
            summary["pulse_states"] = states
            slow_share = states["slow"]["share"]
            share = host_share(summary.get("device_busy_ms"),
                               median_time({"summary": summary, "metrics": metrics or {}}))
            if (device.startswith(SLOW_SHARE_DEVICE) and states["low_from"] == "host"
                    and slow_share >= SLOW_SHARE_BOUND
                    and (share is None or summary.get("host_bound"))):
                reasons.append(
                    f"slow period: {slow_share:.0%} of the timed runs followed a slow host "
                    f"pulse (over {states['fast_bound_ms']:.3g} ms, {FAST_BOUND_OVER_LOW}x this "
                    f"host's low pulse; bound {SLOW_SHARE_BOUND:.0%})")
                summary["slow_period"].update(flagged=True, slow_share=slow_share,
                                              reason="; ".join(reasons))
        if reasons:
            summary["unreliable"] = True
            summary["unreliable_reasons"] = [*(summary.get("unreliable_reasons") or []),
                                             *reasons]
        return [warning] if warning else []


#: Seconds between two reads of the host pulse.
READ_INTERVAL_S = 1.0
#: Pulses a read takes; the least counts (a pulse cut by a moment's preemption reads long).
PULSES_PER_READ = 5
#: Reads in a row within the fast bound that make the host fast.
FAST_READS = 3


def fast_bound_of(line: Mapping[str, Any]) -> Optional[float]:
    """The fast state's bound (ms) the line was judged by, None where it has none."""
    states = (line.get("summary") or {}).get("pulse_states")
    bound = states.get("fast_bound_ms") if isinstance(states, dict) else None
    if isinstance(bound, (int, float)) and not isinstance(bound, bool) and 0 < bound < 1e12:
        return float(bound)
    return None


@dataclass
class FastStateWait:
    """One experiment's wait for the fast state: `ready()` reads the pulse when a read is due
    and says whether to submit now. `pulse` and `clock` are the host's unless a test gives its
    own."""

    bound_ms: float
    limit_s: float
    pulse: Callable[[], float] = host_pulse
    clock: Callable[[], float] = time.monotonic
    started: float = field(default=-1.0)
    reads: int = 0
    fast_in_a_row: int = 0
    last_ms: Optional[float] = None
    _next_read: float = field(default=-1.0, repr=False)

    def __post_init__(self) -> None:
        if self.started < 0:
            self.started = self.clock()
        self._next_read = self.started

    def reached(self) -> bool:
        return self.fast_in_a_row >= FAST_READS

    def ready(self) -> bool:
        """Whether to submit now: the host read fast FAST_READS times in a row, or the wait
        is spent. Reads the pulse when a read is due (at most once per READ_INTERVAL_S)."""
        now = self.clock()
        if not self.reached() and now >= self._next_read:
            self.last_ms = min(self.pulse() for _ in range(PULSES_PER_READ))
            self.reads += 1
            self.fast_in_a_row = self.fast_in_a_row + 1 if self.last_ms <= self.bound_ms else 0
            self._next_read = now + READ_INTERVAL_S
        return self.reached() or now - self.started >= self.limit_s

    def seconds_to_next_read(self) -> float:
        return max(0.0, self._next_read - self.clock())

    def record(self) -> dict[str, Any]:
        """What the wait found, for the next attempt's line."""
        return {"waited_s": round(self.clock() - self.started, 3), "reached": self.reached(),
                "reads": self.reads, "last_pulse_ms": self.last_ms,
                "fast_bound_ms": self.bound_ms, "limit_s": self.limit_s}
