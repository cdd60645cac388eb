"""The order of runs of a verification (runs in the experiment's child).

1. A model listed as nondeterministic (BenchmarkModel.nondeterministic_reason) gets
   NONDETERMINISTIC_EAGER_RUN with the listed reason; nothing runs.
2. Eager runs twice. An exception is EAGER_FAILED; results that differ beyond
   `tolerance.determinism` are NONDETERMINISTIC_EAGER_RUN, naming the first differing output.
3. The fp64 eager reference runs when offered. If it raises, or is not offered, cosine
   similarity against eager decides (details["fp64"] says why).
4. The experiment runs. An exception is EXCEPTION_RAISED with its text.
5. The comparison gives PASS or FAIL; an exception inside it is EXCEPTION_RAISED too.

Every callable builds a fresh model from the same seed, runs one step on the same inputs
and returns the result on the CPU (PreparedModel.result_to_host).
"""

from __future__ import annotations

import logging
import os
import traceback
from typing import Any, Callable, Optional

from core.schema import Verdict, VerificationCode
from verifier.compare import compare, eager_mismatch
from verifier.tolerance import Tolerance

log = logging.getLogger(__name__)

MAX_EXCEPTION_CHARS = 2000


def describe_exception(exc: BaseException) -> str:
    """`Type: message (at file.py:line in function)`, bounded in length."""
    text = f"{type(exc).__name__}: {exc}".strip()
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    if frames:
        last = frames[-1]
        text += f" (at {os.path.basename(last.filename)}:{last.lineno} in {last.name})"
    if len(text) > MAX_EXCEPTION_CHARS:
        half = MAX_EXCEPTION_CHARS // 2
        text = text[:half] + " ... " + text[-half:]
    return text


def verify(
    run_eager: Callable[[], Any],
    run_eager_fp64: Optional[Callable[[], Any]],
    run_experiment: Callable[[], Any],
    *,
    tolerance: Tolerance,
    nondeterministic_reason: Optional[str] = None,
) -> Verdict:
    """Run eager twice, the fp64 reference and the experiment; return the verdict."""
    if nondeterministic_reason:
        return Verdict(VerificationCode.NONDETERMINISTIC_EAGER_RUN,
                       f"model is listed as nondeterministic: {nondeterministic_reason}",
                       {"listed": True})
    results = []
    for attempt in ("first", "second"):
        log.debug("verifier: %s eager run", attempt)
        try:
            results.append(run_eager())
        except Exception as exc:
            return Verdict(VerificationCode.EAGER_FAILED,
                           f"the {attempt} eager run raised {describe_exception(exc)}",
                           {"run": f"eager ({attempt})"})
    mismatch = eager_mismatch(results[0], results[1], tolerance)
    if mismatch:
        return Verdict(VerificationCode.NONDETERMINISTIC_EAGER_RUN,
                       f"two eager runs from the same seed differ: {mismatch}", {"listed": False})
    expected = results[0]
    del results

    reference, fp64_note = None, "no fp64 reference for this experiment"
    if run_eager_fp64 is not None:
        log.debug("verifier: fp64 eager run")
        try:
            reference, fp64_note = run_eager_fp64(), None
        except Exception as exc:
            fp64_note = f"the fp64 eager run raised {describe_exception(exc)}"
            log.info("verifier: fp64 reference unavailable, using cosine: %s", fp64_note)

    log.debug("verifier: experiment run")
    try:
        actual = run_experiment()
    except Exception as exc:
        return Verdict(VerificationCode.EXCEPTION_RAISED,
                       f"the experiment raised {describe_exception(exc)}", {"run": "experiment"})

    try:
        verdict = compare(reference, expected, actual, tolerance)
    except Exception as exc:
        log.exception("verifier: comparison failed")
        return Verdict(VerificationCode.EXCEPTION_RAISED,
                       f"the comparison raised {describe_exception(exc)}", {"run": "comparison"})
    if fp64_note:
        verdict = verdict.with_details(fp64=fp64_note)
    return verdict
