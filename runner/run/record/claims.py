"""Claims: several runners share one results file and never run an experiment twice.

Before running an experiment a runner claims its fingerprint in `<results file>.claims`, a
JSON object next to the results file, read and rewritten (atomically) only under the
results file's lock. Under that same lock it first reads what other runners appended since
it last looked (`core.files.results_file`), so an experiment recorded meanwhile is never run
again. A claim names its runner: run id, host, boot id, pid and the process's start time,
and carries a heartbeat the runner refreshes while its child runs.

Claims are keyed by `claim_key`: the experiment's identity less the fields added since the
first schema version at the value older lines imply, so that runners of two versions on one
results file see each other's claims.

A claim whose runner is gone is taken over:
- on the same machine (same host name and boot id), as soon as its pid no longer runs the
  process that claimed (a reused pid does not count);
- from another machine, once its heartbeat has not changed for `stale_after_seconds` as
  this runner observes it (measured on this runner's own clock, so clocks that disagree
  between machines do not matter); at once where its heartbeat is not a finite number
  (NaN, infinity). A claim whose fields are not numbers where numbers belong, or whose pid
  is no process id (-1, 0, 1.5), is dropped with a warning; a claims file that is no JSON
  object is set aside (core/files/side_files.py) and claims start afresh.

A line is appended under the lock only if the results do not hold the experiment yet, so a
runner that was only slow (its claim taken over meanwhile) never adds a duplicate: its line
is left out with a warning and its child's folder stays. Each line is built from the
result of the child that ran in the line's own folder (`artifacts`), never another's.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import json
import logging
import math
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

import psutil

from core.config import ExperimentConfig, ModelConfig, RunSettings, canonical_json
from core.fields import EXPERIMENT, MODEL, UNVERSIONED, identity_fields
from core.files.cached_json import write_atomically
from core.files.results_file import ResultsFile, ResultsRead
from core.files.side_files import an_object, read_side_file
from runner.plan.resume import recorded_fingerprints
from runner.run.process.signals import deferred

log = logging.getLogger(__name__)

CLAIMS_SUFFIX = ".claims"
#: A claims file holds one entry per running runner; anything this large is not one.
MAX_CLAIMS_BYTES = 8 * 2**20
#: How close a pid's start time must be to the recorded one to be the same process.
START_TIME_TOLERANCE_SECONDS = 1.0
#: The largest pid Linux gives (pid_max's limit, 2**22).
MAX_PID = 2**22


def boot_id() -> str:
    """This boot of this machine (Linux); a host name alone can be shared or reused."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def claim_key(identity: Mapping[str, Mapping[str, Any]]) -> str:
    """The key of an experiment's claim, from its identity ({"model": ..., "experiment":
    ...}, every identity field resolved: `ModelConfig.identity`): the digest of the identity
    less each field added after the first schema version that holds the value lines
    before it imply. Two runner versions that differ by such fields key one experiment
    alike, and so see each other's claims (keyed by their fingerprints, which differ, both
    ran it and one measurement was discarded); a field at another value is another
    experiment, and keys apart."""
    kept = {}
    for scope in (MODEL, EXPERIMENT):
        values = dict(identity.get(scope) or {})
        for spec in identity_fields(scope):
            if (spec.since > UNVERSIONED and spec.name in values
                    and values[spec.name] == spec.implied_value):
                del values[spec.name]
        kept[scope] = values
    return hashlib.sha256(canonical_json(kept).encode("utf-8")).hexdigest()


def claim_key_of(model: ModelConfig, experiment: ExperimentConfig) -> str:
    """`claim_key` of a planned experiment."""
    return claim_key({MODEL: model.identity(), EXPERIMENT: experiment.identity()})


@dataclass(frozen=True)
class RunnerIdentity:
    """Which runner holds a claim."""

    run_id: str
    host: str
    boot_id: str
    pid: int
    #: The process's start time (psutil), so a pid reused by another process is not taken
    #: for the runner.
    started: float

    @classmethod
    def of_this_process(cls, run_id: str) -> "RunnerIdentity":
        return cls(run_id, socket.gethostname(), boot_id(), os.getpid(),
                   psutil.Process().create_time())

    def describe(self) -> str:
        return f"run {self.run_id} (host {self.host}, pid {self.pid})"


@dataclass(frozen=True)
class Claim:
    """One runner's claim on one experiment."""

    fingerprint: str
    runner: RunnerIdentity
    claimed_at: float
    heartbeat: float

    def to_dict(self) -> dict[str, Any]:
        return {"runner": asdict(self.runner), "claimed_at": self.claimed_at,
                "heartbeat": self.heartbeat}

    @classmethod
    def from_dict(cls, fingerprint: str, data: Any) -> "Claim":
        """ValueError for anything that is not a claim this module wrote."""
        try:
            runner = data["runner"]
            identity = RunnerIdentity(str(runner["run_id"]), str(runner["host"]),
                                      str(runner["boot_id"]), _pid(runner),
                                      _number(runner, "started"))
            return cls(fingerprint, identity, _number(data, "claimed_at"),
                       _number(data, "heartbeat"))
        except (KeyError, TypeError, ValueError, OverflowError) as error:
            raise ValueError(f"not a claim: {error}") from None


@dataclass(frozen=True)
class ClaimOptions:
    """How claims are kept alive and when another runner's claim counts as abandoned."""

    heartbeat_seconds: float = 15.0
    #: Another machine's claim is abandoned when its heartbeat has not moved this long.
    stale_after_seconds: float = 120.0
    #: How often a runner waiting for others' experiments looks again.
    poll_seconds: float = 2.0


class ClaimStatus(str, enum.Enum):
    CLAIMED = "claimed"      # this runner runs it now
    RECORDED = "recorded"    # the results hold it already
    BUSY = "busy"            # a live runner runs it


@dataclass
class ClaimCounts:
    """What happened to claims during a sweep."""

    taken_over: int = 0
    recorded_elsewhere: int = 0
    left_out: int = 0


class Claims:
    """This runner's view of the claims on one results file.

    Use as a context manager: it keeps the heartbeat of the claim being run, and releases
    that claim however the block ends.
    """

    def __init__(self, results: ResultsFile, settings: RunSettings, me: RunnerIdentity,
                 options: ClaimOptions = ClaimOptions(),
                 known: Optional[ResultsRead] = None, resume: bool = True) -> None:
        self.results = results
        #: Whether a recorded line covers its experiment (False for --model-config runs,
        #: which run exactly their one experiment, as PyTorch/XLA's runner does).
        self.resume = resume
        self.settings = settings
        self.me = me
        self.options = options
        self.counts = ClaimCounts()
        self.path = results.path.with_name(results.path.name + CLAIMS_SUFFIX)
        self._recorded: set[str] = set()
        self._offset, self._lineno, self._file_id = 0, 0, None
        if known is not None:
            self._recorded = set(recorded_fingerprints(known.lines, settings))
            self._offset, self._lineno, self._file_id = (
                known.end_offset, known.last_lineno, known.file_id)
        self._observed: dict[str, tuple[float, float]] = {}
        #: The claims this runner holds now (several when it runs experiments side by side).
        self._held: set[str] = set()
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._beating: Optional[threading.Thread] = None

    # The block: heartbeat while it runs, release whatever is held when it ends.

    def __enter__(self) -> "Claims":
        self._stop.clear()
        self._beating = threading.Thread(target=self._beat, name="claims-heartbeat", daemon=True)
        self._beating.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        if self._beating is not None:
            self._beating.join(timeout=self.options.heartbeat_seconds + 5)
        with self._guard:
            held = sorted(self._held)
        for fingerprint in held:
            self.release(fingerprint)

    # Claiming, recording, releasing (each under the results file's lock).

    def claim(self, fingerprint: str, key: Optional[str] = None,
              ) -> tuple[ClaimStatus, Optional[Claim]]:
        """Claim an experiment unless the results hold it or a live runner runs it; `key`
        is the claim's key (`claim_key`; the fingerprint where not given)."""
        key = key or fingerprint
        with self._locked():
            claims = self._load()
            existing = claims.get(key)
            if self.resume and fingerprint in self._refresh():
                if existing is not None and not self._alive(existing):
                    del claims[key]  # its runner recorded it, then died
                    self._save(claims)
                self.counts.recorded_elsewhere += 1
                return ClaimStatus.RECORDED, None
            if existing is not None and existing.runner.run_id != self.me.run_id:
                if self._alive(existing):
                    return ClaimStatus.BUSY, existing
                log.warning("taking over an experiment claimed by %s, which is gone",
                            existing.runner.describe())
                self.counts.taken_over += 1
            now = time.time()
            claims[key] = Claim(key, self.me, now, now)
            self._save(claims)
            with self._guard:
                self._held.add(key)
            return ClaimStatus.CLAIMED, claims[key]

    def record(self, fingerprint: str, line: dict[str, Any], key: Optional[str] = None) -> bool:
        """Append `line` unless the results hold its experiment by now; release the claim
        (`key`, as claimed).

        Returns whether the line was written.
        """
        with self._locked():
            written = not self.resume or fingerprint not in self._refresh()
            if written:
                self.results.append(line)
            else:
                self.counts.left_out += 1
                log.warning("another runner recorded %s meanwhile; this run's line is left "
                            "out (its child's folder stays: %s)", line.get("experiment_id"),
                            ", ".join((line.get("artifacts") or {}).values()) or "-")
            self._recorded.add(fingerprint)
            self._drop(key or fingerprint)
        return written

    def release(self, key: str) -> None:
        """Give up this runner's claim on an experiment, by its claim's key (no-op when it
        holds none)."""
        with self._locked():
            self._drop(key)

    def wait(self) -> None:
        """Pause before looking again at experiments other runners are running."""
        time.sleep(self.options.poll_seconds)

    # Inside.

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with self.results.locked(), deferred():
            yield

    def _drop(self, fingerprint: str) -> None:
        with self._guard:
            self._held.discard(fingerprint)
        claims = self._load()
        held = claims.get(fingerprint)
        if held is not None and held.runner.run_id == self.me.run_id:
            del claims[fingerprint]
            try:
                self._save(claims)
            except OSError as error:
                # Left behind, the claim is taken over once this runner is gone.
                log.warning("could not release the claim on %s: %s", fingerprint[:12],
                            error.strerror or error)

    def _refresh(self) -> set[str]:
        """The fingerprints the results hold for these settings, reading only what is new."""
        try:
            info = os.stat(self.results.path)
        except FileNotFoundError:
            if self._file_id is not None:  # started over elsewhere (--no-resume)
                self._recorded, self._offset, self._lineno, self._file_id = set(), 0, 0, None
            return self._recorded
        if (info.st_dev, info.st_ino) != self._file_id or info.st_size < self._offset:
            if self._file_id is not None:
                self._recorded = set()
            self._offset, self._lineno = 0, 0
        read = self.results.read(self._offset, self._lineno)
        self._recorded |= recorded_fingerprints(read.lines, self.settings)
        self._offset, self._lineno, self._file_id = read.end_offset, read.last_lineno, read.file_id
        return self._recorded

    def _alive(self, claim: Claim) -> bool:
        runner = claim.runner
        if runner.host == self.me.host and runner.boot_id == self.me.boot_id:
            return _process_runs(runner.pid, runner.started)
        # Another machine: alive while its heartbeat moves, as observed on this clock. A
        # heartbeat that is no finite number (NaN never equals itself, so it would look as
        # if it moved at every look) never moves: stale at once.
        if not math.isfinite(claim.heartbeat):
            return False
        now = time.monotonic()
        seen = self._observed.get(claim.fingerprint)
        if seen is None or seen[0] != claim.heartbeat:
            self._observed[claim.fingerprint] = (claim.heartbeat, now)
            return True
        return now - seen[1] < self.options.stale_after_seconds

    def _load(self) -> dict[str, Claim]:
        """The claims in the file: a file that is no JSON object is set aside (claims start
        afresh); an entry that is no claim is dropped with a warning."""
        entries = read_side_file(self.path, _claims_shape, "the claims file",
                                 MAX_CLAIMS_BYTES, constants=True).value or {}
        claims = {}
        for fingerprint, entry in entries.items():
            try:
                claims[fingerprint] = Claim.from_dict(fingerprint, entry)
            except ValueError as error:
                log.warning("%s: claim %s dropped: %s", self.path, fingerprint[:12], error)
        return claims

    def _save(self, claims: dict[str, Claim]) -> None:
        """Rewrite the claims atomically; an empty set leaves no file behind.

        Not synced to the disk (two syncs per experiment cost the sweep about 5 ms each on
        a 2-core machine's disk): a claim matters only while its runner lives, and other
        runners see the new file at once; a file that a machine's crash left empty or cut
        is no JSON object, set aside as any such claims file is."""
        if not claims:
            self.path.unlink(missing_ok=True)
            return
        payload = json.dumps({fp: claim.to_dict() for fp, claim in claims.items()},
                             indent=1).encode("utf-8")
        try:
            write_atomically(self.path, payload)
        except OSError as error:
            if not error.filename:
                raise OSError(error.errno, error.strerror, str(self.path)) from error
            raise

    def _beat(self) -> None:
        """Refresh the heartbeat of the claims being run, until the block ends."""
        while not self._stop.wait(self.options.heartbeat_seconds):
            with self._guard:
                running = sorted(self._held)
            if not running:
                continue
            try:
                with self.results.locked():
                    claims = self._load()
                    now = time.time()
                    for current in running:
                        held = claims.get(current)
                        if held is None or held.runner.run_id != self.me.run_id:
                            log.warning("this runner's claim on %s was taken over; its line "
                                        "will be left out if the other runner records it "
                                        "first", current[:12])
                            continue
                        claims[current] = Claim(current, self.me, held.claimed_at, now)
                    self._save(claims)
            except OSError as error:
                log.warning("could not refresh the claim's heartbeat: %s",
                            error.strerror or error)


def _claims_shape(data: Any) -> dict[str, Any]:
    """The claims file's shape: an object of entries by fingerprint (each entry is checked
    on its own: `Claim.from_dict`)."""
    return dict(an_object(data, "the file"))


def _number(data: dict[str, Any], key: str) -> float:
    """The JSON number under `key` (a string or a boolean is no number: ValueError)."""
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{key} is {value!r}, not a number")
    return float(value)


def _pid(runner: dict[str, Any]) -> int:
    """The claim's pid: a whole number a process can have (ValueError otherwise)."""
    value = runner["pid"]
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_PID:
        raise ValueError(f"pid is {value!r}, not a process id")
    return value


def _process_runs(pid: int, started: float) -> bool:
    """Whether `pid` still runs the process that started at `started` (when in doubt: yes)."""
    try:
        process = psutil.Process(pid)
        return (abs(process.create_time() - started) < START_TIME_TOLERANCE_SECONDS
                and process.status() != psutil.STATUS_ZOMBIE)
    except (psutil.NoSuchProcess, ValueError, OverflowError):
        return False
    except psutil.AccessDenied:
        return True
