"""Verification of an experiment's results against eager (and an fp64 eager reference).

`verifier.procedure.verify` runs the order of runs in the child; `verifier.compare` is the
pure comparison of nested results; `verifier.tree` walks nested results leaf by leaf.
"""
