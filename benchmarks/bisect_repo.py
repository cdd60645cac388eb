"""Build a small model repository to bisect: N commits, one of which makes the model worse.

    python -m benchmarks.bisect_repo DEST [--commits 24] [--bad-at 13] [--change slower]

The repository is shaped as a TorchBench checkout (torchbenchmark/models/launches), so that a
sweep finds its model with `--suite-name torchbench --torchbench-dir {tree}`. The model's
forward is a loop of tiny elementwise operations: on CUDA each is a kernel launch of a few
microseconds, so the iteration is bound by the host's launches, not by the GPU; on a CPU it
is bound by the dispatcher. Every commit changes a note; commit `bad-at` (0 is the first)
changes the model:

- slower: the loop launches `factor` times as many operations (default 1.3: 30% slower);
- verdict: a compiled forward returns a different result (the verifier's verdict turns
  from PASS to FAIL under dynamo; eager is unchanged);
- fail: the forward raises.

`--setup-fail-at I` adds a file BROKEN at commit I (removed at the next one), so that a
setup of `test ! -e BROKEN` fails there. Prints the commits, oldest first.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path
from typing import Optional, Sequence

MODEL_NAME = "launches"
CHANGES = ("slower", "verdict", "fail")

_MODEL = '''"""A host-bound model: a loop of tiny elementwise operations (settings.py says how many)."""

import torch
from torch import nn

from torchbenchmark import settings


class Launches(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.full((64,), 1.0001))

    def forward(self, x):
        for _ in range(settings.STEPS):
            x = torch.tanh(x * self.scale)
        if settings.CHANGE == "fail":
            raise RuntimeError("the model broke at this commit")
        if settings.CHANGE == "verdict" and torch.compiler.is_compiling():
            x = x + 1.0
        return x


class Model:
    DEFAULT_EVAL_BSIZE = 16
    DEFAULT_TRAIN_BSIZE = 16

    def __init__(self, test, device, batch_size=None, extra_args=()):
        self.batch_size = batch_size or self.DEFAULT_EVAL_BSIZE
        self.model = Launches().to(device)
        self.model.train(test == "train")
        self.example_inputs = (torch.randn(self.batch_size, 64, device=device),)

    def get_module(self):
        return self.model, self.example_inputs
'''


def _git(dest: Path, *args: str, when: int = 0) -> str:
    stamp = f"2026-01-01T00:{when // 60:02d}:{when % 60:02d}+00:00"
    environment = {**os.environ, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp,
                   "GIT_AUTHOR_NAME": "bisect", "GIT_AUTHOR_EMAIL": "bisect@example.com",
                   "GIT_COMMITTER_NAME": "bisect", "GIT_COMMITTER_EMAIL": "bisect@example.com"}
    return subprocess.run(["git", "-C", str(dest), *args], check=True, capture_output=True,
                          text=True, env=environment).stdout


def build(dest: Path, commits: int = 24, bad_at: int = 13, change: str = "slower",
          steps: int = 200, factor: float = 1.3,
          setup_fail_at: Optional[int] = None) -> list[str]:
    """Make the repository at `dest` (a new folder); its commits' hashes, oldest first."""
    if change not in CHANGES:
        raise ValueError(f"change {change!r} is not one of {', '.join(CHANGES)}")
    if not 0 < bad_at < commits:
        raise ValueError(f"bad-at {bad_at} must be between 1 and {commits - 1}")
    dest.mkdir(parents=True)
    _git(dest, "init", "-q", "-b", "main")
    package = dest / "torchbenchmark"
    (package / "models" / MODEL_NAME).mkdir(parents=True)
    (package / "__init__.py").write_text('"""A model repository made to be bisected."""\n')
    (package / "models" / "__init__.py").write_text("")
    (package / "models" / MODEL_NAME / "__init__.py").write_text(_MODEL)
    hashes = []
    for index in range(commits):
        bad = index >= bad_at
        bad_steps = round(steps * factor) if change == "slower" and bad else steps
        (package / "settings.py").write_text(
            f"NOTE = {index}\nSTEPS = {bad_steps}\n"
            f"CHANGE = {(change if bad else 'none')!r}\n")
        broken = dest / "BROKEN"
        if setup_fail_at is not None and index == setup_fail_at:
            broken.write_text("setup fails here\n")
        elif broken.exists():
            broken.unlink()
        _git(dest, "add", "-A")
        title = f"commit {index}" + (f": the model {change}" if index == bad_at else "")
        _git(dest, "commit", "-q", "-m", title, when=index)
        hashes.append(_git(dest, "rev-parse", "HEAD").strip())
    return hashes


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dest", type=Path, help="a new folder for the repository")
    parser.add_argument("--commits", type=int, default=24)
    parser.add_argument("--bad-at", type=int, default=13, help="the first bad commit (0-based)")
    parser.add_argument("--change", choices=CHANGES, default="slower")
    parser.add_argument("--steps", type=int, default=200,
                        help="operations a forward launches before the change (default 200)")
    parser.add_argument("--factor", type=float, default=1.3,
                        help="how many times as many after it (slower; default 1.3)")
    parser.add_argument("--setup-fail-at", type=int, default=None)
    args = parser.parse_args(argv)
    for index, commit in enumerate(build(args.dest, args.commits, args.bad_at, args.change,
                                         args.steps, args.factor, args.setup_fail_at)):
        print(index, commit)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
