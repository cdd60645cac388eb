"""The host probe: a child that imports torch, and its answer kept for a day."""

from __future__ import annotations

import json
import os
import time

import pytest

from runner.plan.probe import PROBE_CACHE_SECONDS, probe_cache_path, probe_host, probe_key


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.e2e
def test_the_answer_is_kept_and_used_until_it_is_a_day_old(own_cache):
    fresh = probe_host()
    assert fresh.torch_version and fresh.torch_error is None
    path = probe_cache_path()
    assert path.is_relative_to(own_cache / "experiment-runner" / "host")
    kept = json.loads(path.read_text())
    assert kept["torch_version"] == fresh.torch_version
    kept["torch_version"] = "0.0.0+cached"
    path.write_text(json.dumps(kept))
    assert probe_host().torch_version == "0.0.0+cached"  # no child asked
    assert probe_host(use_cache=False).torch_version == fresh.torch_version
    old = time.time() - PROBE_CACHE_SECONDS - 60
    path.write_text(json.dumps(kept))
    os.utime(path, (old, old))
    assert probe_host().torch_version == fresh.torch_version  # too old: asked again
    assert json.loads(path.read_text())["torch_version"] == fresh.torch_version


def test_the_key_follows_devices_and_installed_packages(own_cache, monkeypatch, tmp_path):
    key = probe_key()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    assert probe_key() != key
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert probe_key() == key
    packages = tmp_path / "site"
    packages.mkdir()
    monkeypatch.syspath_prepend(str(packages))
    with_folder = probe_key()
    (packages / "newly_installed-1.0.dist-info").mkdir()
    os.utime(packages, (time.time() + 5, time.time() + 5))
    assert probe_key() != with_folder


@pytest.mark.e2e
def test_a_failed_probe_is_reported_and_never_kept(own_cache, monkeypatch, tmp_path):
    broken = tmp_path / "broken"
    (broken / "torch").mkdir(parents=True)
    (broken / "torch" / "__init__.py").write_text("raise ImportError('this torch is broken')\n")
    monkeypatch.setenv("PYTHONPATH", str(broken))
    answer = probe_host()
    assert "this torch is broken" in answer.torch_error
    assert not probe_cache_path().exists()
