"""The faults suite: models that fail on purpose, so failure handling is tested for real.

Each fails inside its forward call, in the child's timing loop:
raises (an exception), segfault (SIGSEGV), exit (os._exit), signal (SIGTERM to itself),
hang (sleeps forever, with a grandchild process of its own), memory_hog (allocates until
stopped), gpu_oom (raises what PyTorch raises when a GPU's memory runs out). Only the child ever builds them.
"""

from __future__ import annotations

from models.base import BuilderSuite

FAULT_MODELS = ("raises", "segfault", "exit", "signal", "hang", "memory_hog", "gpu_oom")


class FaultsSuite(BuilderSuite):
    name = "faults"
    order = 20
    builder = "faults"
    batch_sizes = {name: 2 for name in FAULT_MODELS}


SUITE = FaultsSuite
