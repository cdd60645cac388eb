"""The points of a range and where each is measured: a git worktree of a commit (with the
user's setup command run in it), or a cached virtual environment holding one version of a
package on top of this environment."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from bisection.driver import BisectError, Point

log = logging.getLogger(__name__)

#: Characters of a commit's hash in its label (the lines' `point`).
SHORT_HASH = 12


class SetupFailed(RuntimeError):
    """A point whose worktree or environment could not be made: it is skipped."""


def _git(repo: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                              check=False)
    except FileNotFoundError:
        raise BisectError("git is not installed: bisecting commits needs it") from None
    if done.returncode != 0:
        raise BisectError(f"git {' '.join(args)} in {repo}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def commit_points(repo: Path, good: str, bad: str) -> list[Point]:
    """The commits from `good` to `bad` in order, following first parents: the good end,
    each commit after it on the way to `bad`, and `bad`."""
    if not (repo / ".git").exists() and not _git(repo, "rev-parse", "--git-dir").strip():
        raise BisectError(f"--repo {repo} is not a git repository")
    good_hash = _git(repo, "rev-parse", "--verify", f"{good}^{{commit}}").strip()
    bad_hash = _git(repo, "rev-parse", "--verify", f"{bad}^{{commit}}").strip()
    if good_hash == bad_hash:
        raise BisectError(f"--good {good} and --bad {bad} are the same commit")
    ancestor = subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor",
                               good_hash, bad_hash], capture_output=True)
    if ancestor.returncode != 0:
        raise BisectError(f"--good {good} is not an ancestor of --bad {bad}")
    listed = _git(repo, "log", "--first-parent", "--reverse", "--format=%H %s",
                  f"{good_hash}..{bad_hash}").splitlines()
    subject = _git(repo, "log", "-1", "--format=%s", good_hash).strip()
    points = [Point(good_hash[:SHORT_HASH], good_hash, subject)]
    for line in listed:
        full, _, title = line.partition(" ")
        points.append(Point(full[:SHORT_HASH], full, title))
    if points[-1].ref != bad_hash:
        raise BisectError(f"--bad {bad} is not reached from --good {good} by first parents")
    return points


def version_points(package: str, versions: Sequence[str]) -> list[Point]:
    """One point per version, in the order given (the good end first)."""
    if len(versions) < 2:
        raise BisectError("--versions needs at least two versions: a good one and a bad one")
    if len(set(versions)) != len(versions):
        raise BisectError(f"--versions names a version twice: {','.join(versions)}")
    return [Point(f"{package}=={version}", version, "") for version in versions]


@dataclass(frozen=True)
class PointPlace:
    """Where a point's sweep runs: the interpreter, folders put first on its path, and the
    point's tree (a worktree; None for a version)."""

    python: str
    path: tuple[str, ...] = ()
    tree: Optional[Path] = None


def _run_setup(command: str, tree: Path, environment: dict, log_file: Path) -> None:
    with open(log_file, "a", encoding="utf-8") as out:
        out.write(f"$ {command}\n")
        out.flush()
        done = subprocess.run(command, shell=True, cwd=str(tree), env=environment,
                              stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        tail = log_file.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
        raise SetupFailed(f"--setup exited with {done.returncode}: " + " | ".join(tail))


@dataclass
class Worktrees:
    """Each commit in a worktree of its own under `folder` (never the user's tree), with
    `setup` run in it once (a marker beside it says it succeeded)."""

    repo: Path
    folder: Path
    setup: Optional[str] = None
    #: git's worktree commands of one repository, one at a time (points made at once).
    _git_lock: threading.Lock = field(default_factory=threading.Lock)

    def place(self, point: Point, log_file: Path) -> PointPlace:
        tree = self.folder / point.label
        done_marker = self.folder / f"{point.label}.ready"
        if not done_marker.exists():
            with self._git_lock:
                self._add(point, tree)
            if self.setup:
                environment = {**os.environ, "BISECT_POINT": point.label, "BISECT_TREE": str(tree)}
                _run_setup(self.setup, tree, environment, log_file)
            done_marker.write_text(point.ref + "\n", encoding="utf-8")
        return PointPlace(sys.executable, (str(tree),), tree)

    def _add(self, point: Point, tree: Path) -> None:
        if tree.exists():  # a worktree left half-made by a stopped bisection
            shutil.rmtree(tree, ignore_errors=True)
            subprocess.run(["git", "-C", str(self.repo), "worktree", "prune"],
                           capture_output=True)
        self.folder.mkdir(parents=True, exist_ok=True)
        added = subprocess.run(["git", "-C", str(self.repo), "worktree", "add", "--detach",
                                "--force", str(tree), point.ref],
                               capture_output=True, text=True)
        if added.returncode != 0:
            raise SetupFailed(f"git worktree add: {added.stderr.strip()}")

    def remove(self) -> None:
        """Remove the worktrees (the bisection is over)."""
        subprocess.run(["git", "-C", str(self.repo), "worktree", "prune"], capture_output=True)
        for marker in self.folder.glob("*.ready"):
            tree = marker.with_suffix("")
            subprocess.run(["git", "-C", str(self.repo), "worktree", "remove", "--force",
                            str(tree)], capture_output=True)
            marker.unlink(missing_ok=True)
        shutil.rmtree(self.folder, ignore_errors=True)


def _this_site_packages() -> str:
    return sysconfig.get_paths()["purelib"]


def environments_folder() -> Path:
    """Where versions' environments are cached: $XDG_CACHE_HOME (else ~/.cache)
    /experiment-runner/bisect-envs/<this environment's digest>."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(f"{sys.prefix}\0{_this_site_packages()}".encode()).hexdigest()[:12]
    return base / "experiment-runner" / "bisect-envs" / digest


@dataclass
class VersionEnvironments:
    """Each version of `package` in a cached virtual environment of its own, made with uv
    where it is installed, else with venv and pip. The package alone is installed there
    (no dependencies); a .pth file puts this environment's packages after it, so that
    everything else is shared."""

    package: str
    folder: Path
    setup: Optional[str] = None

    def _make(self, version: str, target: Path, log_file: Path) -> None:
        uv = shutil.which("uv")
        spec = f"{self.package}=={version}"
        if uv:
            commands = [[uv, "venv", "--python", sys.executable, str(target)],
                        [uv, "pip", "install", "--python", str(target / "bin" / "python"),
                         "--no-deps", spec]]
        else:
            commands = [[sys.executable, "-m", "venv", "--without-pip", str(target)],
                        [sys.executable, "-m", "pip", "--python", str(target / "bin" / "python"),
                         "install", "--no-deps", "--ignore-installed",
                         "--disable-pip-version-check", "--no-input", spec]]
        with open(log_file, "a", encoding="utf-8") as out:
            for command in commands:
                out.write("$ " + " ".join(command) + "\n")
                out.flush()
                done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT)
                if done.returncode != 0:
                    tail = log_file.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-2:]
                    raise SetupFailed(f"installing {spec} failed: " + " | ".join(tail))
        python = target / "bin" / "python"
        purelib = subprocess.run([str(python), "-c", "import sysconfig; "
                                  "print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        # A site folder of its own (its .pth files read too), after the environment's.
        Path(purelib, "_experiment_runner_shared.pth").write_text(
            f"import site; site.addsitedir({_this_site_packages()!r})\n", encoding="utf-8")

    def place(self, point: Point, log_file: Path) -> PointPlace:
        target = self.folder / f"{self.package}-{point.ref}"
        marker = self.folder / f"{self.package}-{point.ref}.ready"
        if not marker.exists():
            shutil.rmtree(target, ignore_errors=True)
            self.folder.mkdir(parents=True, exist_ok=True)
            self._make(point.ref, target, log_file)
            if self.setup:
                environment = {**os.environ, "BISECT_POINT": point.label,
                               "VIRTUAL_ENV": str(target),
                               "PATH": f"{target / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
                _run_setup(self.setup, target, environment, log_file)
            marker.write_text(point.ref + "\n", encoding="utf-8")
        return PointPlace(str(target / "bin" / "python"))
