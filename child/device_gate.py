"""Children on one GPU take turns on the card, and compile while another times.

Every CUDA child (timing or verification) of this user's runners on the host takes its
GPU's gate, an exclusive lock on a file named for the GPU (`flock`, runner/run/process/child_env.py's
`gate_path`): before its first touch of the card (its runtime, model build, CUDA context), to
its exit, which drops it however the child ends. Two runners that share a GPU by mistake
then no longer time on top of each other, and `--experiments-per-gpu K` runs K experiments
per GPU on purpose, each on cores of its own.

The one exception: while torch.compile compiles a frame, or the backward that AOTAutograd
compiles lazily, the child waits for its queued work to finish and lends the gate, so that
another child can run its warm-up and timed runs on the card while this one compiles on its
own cores. It takes the gate back before the compiled code runs: inductor's tuning at a
kernel's first launch, cudagraph recording, every warm-up and timed iteration run with the
gate held. A timing child lends it only where its stack says compiling runs nothing on the
card (`Stack.compiles_off_the_card`: not inductor's max-autotune, which times candidate
kernels as it compiles, nor freezing, which folds constants through the graph, nor XLA,
whose compiles tune on the card); a verification child keeps it throughout.
Once the timed runs start nothing is lent either: a recompile then would put a wait inside a
timed run.

The time a child waits for the gate is left out of its cold start and compile figures
(`working_clock`) and of its timeout (the runner reads the waits from GATE_WAITS_FILE in the
child's folder); the line records the waits and loans under `summary.device_gate`.
Dynamo's own compile times (`summary.dynamo_compile_times_s`) include a wait to take the
gate back, since dynamo's clock runs until the compile's end callbacks return.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from typing import Any, Callable, Optional

log = logging.getLogger(__name__)

#: torch._dynamo.callback's triggers (CallbackTrigger names) during which the gate is lent:
#: a frame compiled by dynamo, and the backward that AOTAutograd compiles at its first call.
#: CUDAGRAPH_RECORDING and TRITON_AUTOTUNING run on the card and keep it.
LENT_DURING = frozenset({"DYNAMO", "LAZY_BACKWARD"})


class DeviceGate:
    """The exclusive turn on a shared GPU (an flock on `path`), lent during compiles."""

    def __init__(self, path: str, clock: Callable[[], float] = time.perf_counter,
                 waits_file: Optional[str] = None) -> None:
        self.path = path
        self._clock = clock
        self._waits_file = waits_file
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self._state = threading.Lock()
        self._held = False
        self._lent_at: Optional[float] = None
        self.waited_s = 0.0
        self.lent_s = 0.0
        self.waits = 0
        self.loans = 0
        self._callbacks: Optional[tuple[Any, Any]] = None

    @property
    def held(self) -> bool:
        return self._held

    def acquire(self) -> None:
        """Wait for the card (the wait counts in `waited_s`, not in the compile figure)."""
        with self._state:
            if self._held:
                return
            started = self._clock()
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._tell_waits(waiting_since=time.time())
                fcntl.flock(self._fd, fcntl.LOCK_EX)
                self.waited_s += self._clock() - started
                self._tell_waits()
            self.waits += 1
            self._held = True

    def release(self) -> None:
        """Give the card up, once the work this process queued on it has finished."""
        with self._state:
            if not self._held:
                return
            _synchronize_cuda()
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            self._held = False

    def working_clock(self) -> float:
        """A clock that stops while this child waits for the gate (the compile figure's)."""
        return self._clock() - self.waited_s

    def lend_during_compiles(self) -> None:
        """From now on, lend the gate while dynamo compiles a frame or AOTAutograd a
        backward (torch._dynamo.callback's start and end of a compile)."""
        from torch._dynamo.callback import callback_handler

        if self._callbacks is None:
            self._callbacks = (callback_handler.register_start_callback(self._compile_started),
                               callback_handler.register_end_callback(self._compile_ended))

    def stop_lending(self) -> None:
        """Lend nothing more (the timed runs start, or the child's work is done): the gate
        stays held to the end."""
        if self._callbacks is not None:
            from torch._dynamo.callback import callback_handler

            start, end = self._callbacks
            callback_handler.remove_start_callback(start)
            callback_handler.remove_end_callback(end)
            self._callbacks = None

    def close(self) -> None:
        """Stop lending and give the gate up."""
        self.stop_lending()
        self.release()
        os.close(self._fd)

    def record(self) -> dict[str, Any]:
        """What the line keeps: the waits for the card and the compiles it was lent for."""
        return {"waited_s": round(self.waited_s, 3), "waits": self.waits,
                "lent_s": round(self.lent_s, 3), "loans": self.loans}

    def _tell_waits(self, waiting_since: Optional[float] = None) -> None:
        """Keep the waits where the runner reads them when the child's time runs out
        (GATE_WAITS_FILE): its timeout leaves them out."""
        if self._waits_file is None:
            return
        text = f"{self.waited_s:.3f} {'-' if waiting_since is None else f'{waiting_since:.3f}'}\n"
        partial = self._waits_file + ".partial"
        try:
            with open(partial, "w") as file:
                file.write(text)
            os.replace(partial, self._waits_file)
        except OSError as error:  # the timeout then counts the waits; the figures do not
            log.warning("the waits for the GPU could not be kept for the timeout: %s", error)

    def _compile_started(self, args: Any) -> None:
        if _trigger_name(args) not in LENT_DURING:
            return
        if self._held:
            self.release()
            self._lent_at = self._clock()
            self.loans += 1

    def _compile_ended(self, args: Any) -> None:
        if self._lent_at is None:
            return
        self.lent_s += self._clock() - self._lent_at
        self._lent_at = None
        self.acquire()


def _trigger_name(args: Any) -> str:
    trigger = getattr(args, "callback_trigger", None)
    return getattr(trigger, "name", str(trigger))


def _synchronize_cuda() -> None:
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()
