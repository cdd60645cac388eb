"""Where the project lies: the folder holding experiment_runner.py and its packages."""

from pathlib import Path

#: Put first on the import path of every process the runner starts (the probe, fork servers,
#: children), so that they find the project wherever they are started from, installed or not.
PROJECT_ROOT = Path(__file__).resolve().parents[2]
