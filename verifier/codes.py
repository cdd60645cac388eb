"""Verification codes and the verdict that carries one with its reason."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Optional


class Code(str, enum.Enum):
    """The codes of a results line's `verification_code` (runner.results.VERIFIER_CODES)."""

    PASS = "PASS"
    FAIL = "FAIL"
    EAGER_FAILED = "EAGER_FAILED"
    EXCEPTION_RAISED = "EXCEPTION_RAISED"
    NONDETERMINISTIC_EAGER_RUN = "NONDETERMINISTIC_EAGER_RUN"
    VERIFIER_SKIPPED = "VERIFIER_SKIPPED"
    VERIFIER_DIDNT_RUN = "VERIFIER_DIDNT_RUN"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Verdict:
    """The outcome of a verification.

    `reason` says, for anything but a plain pass, which output or which error decided it;
    `details` holds JSON-ready numbers (errors, cosine, the failing path, the method).
    """

    code: Code
    reason: Optional[str] = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.code is Code.PASS

    def with_details(self, **extra: Any) -> "Verdict":
        """A copy with more details (existing keys are kept unless given again)."""
        return Verdict(self.code, self.reason, {**self.details, **extra})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: {"code", "reason", "details"}."""
        return {"code": self.code.value, "reason": self.reason, "details": dict(self.details)}

    @classmethod
    def skipped(cls, reason: str) -> "Verdict":
        """Verification was not asked for, or does not apply."""
        return cls(Code.VERIFIER_SKIPPED, reason)

    @classmethod
    def didnt_run(cls, reason: str) -> "Verdict":
        """The verification process ended without a verdict (crash, timeout)."""
        return cls(Code.VERIFIER_DIDNT_RUN, reason)
