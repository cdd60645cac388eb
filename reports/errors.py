"""The one error type of the reports package."""


class ReportError(RuntimeError):
    """Input a report cannot be made from; the message names the offending value."""
