"""Observability: dynamo counters, profiler metrics and traces, XLA metrics, HLO and IR dumps.

`layout` and `rules` are parent-safe (no torch); the other modules run in the child, called
from the worker and the timing loop through `session.ExperimentObservers`.
"""
