"""benchmarks/fidelity/fidelity.sh's harness side: each harness stream on its GPU and its own
cores."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import cli_environment

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "benchmarks" / "fidelity" / "fidelity.sh"

# Stands in for the harness's huggingface.py: writes where it ran, and whether its
# common.timed was wrapped to start on the fastest core, instead of a CSV.
FAKE_HARNESS = '''
import os, sys
import common
output = sys.argv[sys.argv.index("--output") + 1]
cores = ",".join(str(core) for core in sorted(os.sched_getaffinity(0)))
wrapped = hasattr(common.timed, "__wrapped__")
with open(output, "w") as file:
    file.write(f"{os.environ.get('CUDA_VISIBLE_DEVICES')};{cores};{wrapped};"
               f"{' '.join(sys.argv[1:])}\\n")
'''


@pytest.fixture
def fake_harness(tmp_path):
    harness = tmp_path / "harness"
    harness.mkdir()
    (harness / "huggingface.py").write_text(FAKE_HARNESS)
    (harness / "common.py").write_text("def timed(*args, **kwargs):\n    return 0.0\n")
    return harness


def run_fake_harness(harness, out, cases, **variables):
    environment = {**cli_environment(), "TOOLS": "harness", "PYTHON": sys.executable,
                   "PYTHONPATH": str(ROOT), **variables}
    return subprocess.run(["bash", str(SCRIPT), str(harness),
                           str(out), str(cases)], env=environment, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to split")
def test_harness_streams_run_on_their_gpus_and_disjoint_cores(fake_harness, tmp_path):
    harness = fake_harness
    cases = tmp_path / "cases.txt"
    cases.write_text("huggingface ModelA 8 bf16 default eval\n"
                     "huggingface ModelB 8 bf16 default eval\n")
    out = tmp_path / "out"
    run_fake_harness(harness, out, cases, HARNESS_GPUS="4,6")
    ran = {}
    for model in ("ModelA", "ModelB"):
        device, cores, _, _ = (out / f"peer-huggingface-{model}-bs8-bf16-default-eval.csv") \
            .read_text().strip().split(";")
        ran[model] = (device, set(cores.split(",")))
    assert ran["ModelA"][0] == "4" and ran["ModelB"][0] == "6"
    assert ran["ModelA"][1] and ran["ModelB"][1]
    assert not ran["ModelA"][1] & ran["ModelB"][1]
    # Each case's start and end, for benchmarks/cost/sweep_cost.py.
    for model in ("ModelA", "ModelB"):
        start, end = map(float, (out / f"peer-huggingface-{model}-bs8-bf16-default-eval.wall")
                         .read_text().split())
        assert 0 <= end - start < 120


@pytest.mark.parametrize("timing_core, wrapped", [(None, "False"), ("fastest", "True"),
                                                   ("any", "False")])
def test_the_harness_runs_plainly_unless_told_fastest(fake_harness, tmp_path,
                                                               timing_core, wrapped):
    cases = tmp_path / "cases.txt"
    cases.write_text("huggingface ModelA 8 bf16 default eval\n")
    out = tmp_path / "out"
    variables = {"TIMING_CORE": timing_core} if timing_core else {}
    completed = run_fake_harness(fake_harness, out, cases, **variables)
    written = (out / "peer-huggingface-ModelA-bs8-bf16-default-eval.csv").read_text()
    assert written.strip().split(";")[2] == wrapped, completed.stderr[-2000:]


# Stands in for the harness: writes its cache folder and what that held at its start, then
# leaves a compiled kernel there, as a run of the harness does.
CACHE_HARNESS = '''
import os, sys
output = sys.argv[sys.argv.index("--output") + 1]
cache = os.environ["TORCHINDUCTOR_CACHE_DIR"]
with open(output, "w") as file:
    file.write(f"{cache};{sorted(os.listdir(cache))}\\n")
open(os.path.join(cache, "kernel.so"), "w").close()
'''


def test_the_harness_runs_each_case_twice_each_run_cold(tmp_path):
    harness = tmp_path / "harness"
    harness.mkdir()
    (harness / "huggingface.py").write_text(CACHE_HARNESS)
    cases = tmp_path / "cases.txt"
    cases.write_text("huggingface ModelA 8 bf16 default eval\n")
    out = tmp_path / "out"
    completed = run_fake_harness(harness, out, cases)
    name = "peer-huggingface-ModelA-bs8-bf16-default-eval"
    runs = [(out / f"{stem}.csv").read_text().strip().split(";")
            for stem in (name, f"{name}-run2")]
    assert [held for _, held in runs] == ["[]", "[]"], completed.stderr[-2000:]
    assert runs[0][0] != runs[1][0]  # a cache folder of its own, empty, for each run
    assert (out / f"{name}.wall").exists() and (out / f"{name}-run2.wall").exists()
    assert not (out / f"{name}-run3.csv").exists()
    # A second call resumes: runs already made are not made again; a third run is added.
    first = (out / f"{name}.csv").read_text()
    run_fake_harness(harness, out, cases, HARNESS_RUNS="3")
    assert (out / f"{name}.csv").read_text() == first
    assert (out / f"{name}-run3.csv").read_text().strip().endswith(";[]")
    completed = run_fake_harness(harness, out, cases, HARNESS_RUNS="0")
    assert completed.returncode == 2 and "HARNESS_RUNS" in completed.stderr


def test_an_unknown_timing_core_is_named_with_a_non_zero_exit(fake_harness, tmp_path):
    cases = tmp_path / "cases.txt"
    cases.write_text("huggingface ModelA 8 bf16 default eval\n")
    completed = run_fake_harness(fake_harness, tmp_path / "out", cases, TIMING_CORE="slowest")
    assert completed.returncode == 2 and "'slowest'" in completed.stderr


def test_each_case_reaches_the_harness_with_its_precision_test_batch_and_mode(fake_harness,
                                                                              tmp_path):
    cases = tmp_path / "cases.txt"
    cases.write_text("huggingface ModelA 4 fp32 default train\n"
                     "huggingface ModelA 1 fp16 cudagraphs eval\n"
                     "huggingface ModelB 2 fp64 default eval\n")
    out = tmp_path / "out"
    completed = run_fake_harness(fake_harness, out, cases, TIMING_CORE="any")
    first = (out / "peer-huggingface-ModelA-bs4-fp32-default-train.csv").read_text()
    second = (out / "peer-huggingface-ModelA-bs1-fp16-cudagraphs-eval.csv").read_text()
    first_flags, second_flags = (text.strip().split(";")[3].split() for text in (first, second))
    assert first_flags[first_flags.index("--batch-size") + 1] == "4"
    assert {"--float32", "--training", "--disable-cudagraphs"} <= set(first_flags)
    assert {"--float16", "--inference"} <= set(second_flags)
    assert "--disable-cudagraphs" not in second_flags
    assert "not a case: huggingface ModelB 2 fp64" in completed.stderr
    assert not list(out.glob("peer-huggingface-ModelB-*"))


# Stands in for the Python that runs our runner: records each sweep's arguments (a line per
# invocation) instead of running it; anything else (listing the suite's models, splitting the
# cores) runs for real.
RECORDING_PYTHON = '''#!/usr/bin/env bash
if [ "$1" = experiment_runner.py ] && [[ " $* " != *" --list-models "* ]]; then
  echo "$*" >> "{record}"; exit 0
fi
exec "{python}" "$@"
'''


def run_recorded_ours(tmp_path, cases_text, **variables):
    """fidelity.sh with TOOLS=ours on `cases_text`: each invocation's arguments, and the run."""
    record = tmp_path / "invocations.txt"
    python = tmp_path / "python"
    python.write_text(RECORDING_PYTHON.format(record=record, python=sys.executable))
    python.chmod(0o755)
    cases = tmp_path / "cases.txt"
    cases.write_text(cases_text)
    environment = {**cli_environment(), "TOOLS": "ours", "PYTHON": str(python),
                   "PYTHONPATH": str(ROOT), **variables}
    completed = subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path / "harness"),
         str(tmp_path / "out"), str(cases)],
        env=environment, capture_output=True, text=True, timeout=120)
    invocations = [line.split() for line in record.read_text().splitlines()] \
        if record.exists() else []
    return invocations, completed


def test_our_flags_reach_our_runner_after_its_own(tmp_path):
    invocations, completed = run_recorded_ours(
        tmp_path, "timm mobilenetv2_100 8 amp default eval\n",
        OUR_FLAGS="--processes=5 --process-caches=fresh")
    assert len(invocations) == 1, completed.stderr[-2000:]
    arguments = invocations[0]
    assert "--processes=5" in arguments and "--process-caches=fresh" in arguments
    assert arguments.index("--process-caches=fresh") > arguments.index("--repeat=30")
    assert "--batch-size=8" in arguments and "-k" in arguments
    start, end, gpus = (tmp_path / "out" / "ours-timm-bs8-amp-default-eval.wall").read_text().split()
    assert 0 <= float(end) - float(start) < 120 and gpus == "1"
    # The launching thread where TIMING_CORE puts the harness's (the scheduler by default), unless
    # OUR_FLAGS says otherwise (given after, so it wins).
    assert arguments.index("--timing-core=any") < arguments.index("--processes=5")


def test_per_case_runs_ours_once_per_case_each_with_its_wall(tmp_path):
    """PER_CASE=1: one invocation per case (what a user types to check one model), one after
    the other on the first of OUR_GPUS, each case's wall in ours-case-NAME.wall."""
    invocations, completed = run_recorded_ours(
        tmp_path, "timm adv_inception_v3 128 amp default eval\n"
                  "timm adv_inception_v3 128 amp default train\n"
                  "huggingface BertForMaskedLM 4 fp16 cudagraphs eval\n",
        PER_CASE="1", OUR_GPUS="3,5")
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert len(invocations) == 3
    for arguments, test in zip(invocations, ("eval", "train", "eval")):
        assert f"--test={test}" in arguments and "--jobs=1" in arguments
        assert "--devices=3" in arguments
    assert "--batch-size=4" in invocations[2]  # not the list's own
    walls = sorted(path.name for path in (tmp_path / "out").glob("ours-case-*.wall"))
    assert walls == ["ours-case-huggingface-BertForMaskedLM-bs4-fp16-cudagraphs-eval.wall",
                     "ours-case-timm-adv_inception_v3-bs128-amp-default-eval.wall",
                     "ours-case-timm-adv_inception_v3-bs128-amp-default-train.wall"]


def test_a_per_case_value_that_is_not_0_or_1_is_named(fake_harness, tmp_path):
    cases = tmp_path / "cases.txt"
    cases.write_text("huggingface ModelA 8 bf16 default eval\n")
    completed = run_fake_harness(fake_harness, tmp_path / "out", cases, PER_CASE="yes")
    assert completed.returncode == 2 and "PER_CASE must be 0 or 1, not 'yes'" in completed.stderr


def test_ours_runs_a_groups_tests_in_one_invocation_where_every_model_runs_each(tmp_path):
    # A product (2 models x eval, train) at the list's batch sizes, and a group that is not
    # one (a model in eval only), at amp.
    invocations, completed = run_recorded_ours(
        tmp_path, "timm adv_inception_v3 128 amp default eval\n"
                  "timm beit_base_patch16_224 128 amp default train\n"
                  "timm adv_inception_v3 128 amp default train\n"
                  "timm beit_base_patch16_224 128 amp default eval\n"
                  "timm convnextv2_nano 128 bf16 default eval\n"
                  "timm deit_base_distilled_patch16_224 128 bf16 default train\n")
    assert len(invocations) == 3, completed.stderr[-2000:]
    product, *others = invocations
    assert [word for word in product if word.startswith("--test=")] == ["--test=eval",
                                                                         "--test=train"]
    assert product.count("-k") == 2 and "--precision=amp" in product
    assert not any(word.startswith("--batch-size") for word in product)
    assert sorted((word for invocation in others for word in invocation
                   if word.startswith("--test=") or word.startswith("^")), key=str) == [
        "--test=eval", "--test=train", "^convnextv2_nano$", "^deit_base_distilled_patch16_224$"]
    assert (tmp_path / "out" / "ours-timm-bsdefault-amp-default-eval+train.wall").exists()


# Stands in for our runner under LOCKSTEP: python itself, except that a sweep
# (experiment_runner.py without --list-models) records its GPU, cores, flags and start, sleeps,
# and records its end.
FAKE_PYTHON = '''#!/usr/bin/env bash
if [ "$1" = experiment_runner.py ] && [[ " $* " != *" --list-models "* ]]; then
  log="$FAKE_OURS_LOG"
  echo "start $(date +%s.%N) $(python3 -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))') $*" >> "$log"
  sleep 1
  echo "end $(date +%s.%N)" >> "$log"
  exit 0
fi
exec "$REAL_PYTHON" "$@"
'''

SLOW_HARNESS = FAKE_HARNESS + '''
import time
with open(output, "a") as file:
    file.write(f"{time.time()}\\n")
time.sleep(1)
with open(output, "a") as file:
    file.write(f"{time.time()}\\n")
'''


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to split")
@pytest.mark.parametrize("lockstep", ["1", None])
def test_lockstep_starts_both_tools_on_each_case_together(tmp_path, lockstep):
    """LOCKSTEP=1, and the default when both tools run with as many GPUs each."""
    harness = tmp_path / "harness"
    harness.mkdir()
    (harness / "huggingface.py").write_text(SLOW_HARNESS)
    (harness / "common.py").write_text("def timed(*args, **kwargs):\n    return 0.0\n")
    fake_python = tmp_path / "python"
    fake_python.write_text(FAKE_PYTHON)
    fake_python.chmod(0o755)
    cases = tmp_path / "cases.txt"
    cases.write_text("huggingface ModelA 8 bf16 default eval\n"
                     "huggingface ModelB 4 fp16 cudagraphs train\n")
    out = tmp_path / "out"
    ours_log = tmp_path / "ours.log"
    environment = {**{k: v for k, v in os.environ.items() if k not in ("LOCKSTEP", "TOOLS")},
                   "HARNESS_GPUS": "5", "OUR_GPUS": "7",
                   "PYTHON": str(fake_python), "REAL_PYTHON": sys.executable,
                   "FAKE_OURS_LOG": str(ours_log), "PYTHONPATH": str(ROOT),
                   **({"LOCKSTEP": lockstep} if lockstep else {})}
    completed = subprocess.run(["bash", str(SCRIPT), str(harness),
                                str(out), str(cases)], env=environment, capture_output=True,
                               text=True, timeout=120)
    ours = ours_log.read_text().splitlines()
    assert len(ours) == 4, (ours, completed.stderr[-2000:])
    harness_runs = {}
    for model in ("ModelA", "ModelB"):
        # the harness's first run of the case (its second follows, once ours ended)
        path = next(path for path in out.glob(f"peer-huggingface-{model}-*.csv")
                    if "-run" not in path.name)
        head, start, end = path.read_text().splitlines()
        device, cores, _, _ = head.split(";")
        harness_runs[model] = (device, set(cores.split(",")), float(start), float(end))
    ours_runs = [(line.split()[1], ours[index + 1].split()[1]) for index, line in
                 enumerate(ours) if line.startswith("start ")]
    (a_start, a_end), (b_start, b_end) = [(float(s), float(e)) for s, e in ours_runs]
    # Each case: both tools start within a moment of each other...
    assert abs(harness_runs["ModelA"][2] - a_start) < 0.9
    assert abs(harness_runs["ModelB"][2] - b_start) < 0.9
    # ...and the next case starts only once both tools ended the previous one.
    assert b_start >= max(a_end, harness_runs["ModelA"][3]) - 0.05
    assert harness_runs["ModelB"][2] >= max(a_end, harness_runs["ModelA"][3]) - 0.05
    # Each tool on its own GPU and on cores the other does not use.
    first = ours[0].split()
    our_cores = set(first[2].split(","))
    assert harness_runs["ModelA"][0] == "5" and "--devices=7" in first
    assert not our_cores & harness_runs["ModelA"][1]
    # The case's own flags, one invocation per case, and each case's wall for sweep_cost.py.
    assert "-k ^ModelA$" in ours[0] and "--batch-size=8" in ours[0]
    assert "--mode=cudagraphs" in ours[2] and "--test=train" in ours[2]
    for name in ("huggingface-ModelA-bs8-bf16-default-eval",
                 "huggingface-ModelB-bs4-fp16-cudagraphs-train"):
        start, end, gpus = (out / f"ours-case-{name}.wall").read_text().split()
        assert gpus == "1" and float(end) - float(start) >= 1
        assert (out / f"peer-{name}.wall").exists()


def test_lockstep_needs_pairs_of_gpus(fake_harness, tmp_path):
    cases = tmp_path / "cases.txt"
    cases.write_text("huggingface ModelA 8 bf16 default eval\n")
    completed = run_fake_harness(fake_harness, tmp_path / "out", cases, TOOLS="both",
                                 LOCKSTEP="1", HARNESS_GPUS="0,1", OUR_GPUS="2")
    assert completed.returncode == 2
    assert "LOCKSTEP=1 needs as many HARNESS_GPUS as OUR_GPUS" in completed.stderr


@pytest.mark.parametrize("value", ["yes", "2"])
def test_a_lockstep_value_that_is_not_0_or_1_is_named(fake_harness, tmp_path, value):
    cases = tmp_path / "cases.txt"
    cases.write_text("huggingface ModelA 8 bf16 default eval\n")
    completed = run_fake_harness(fake_harness, tmp_path / "out", cases, LOCKSTEP=value)
    assert completed.returncode == 2
    assert f"LOCKSTEP must be 0 or 1, not '{value}'" in completed.stderr


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to split")
def test_per_gpu_lanes_run_each_case_once_at_most_k_a_gpu_on_cores_of_their_own(tmp_path):
    fake_python = tmp_path / "python"
    fake_python.write_text(FAKE_PYTHON)
    fake_python.chmod(0o755)
    cases = tmp_path / "cases.txt"
    cases.write_text("".join(f"huggingface Model{x} 8 bf16 default eval\n" for x in "ABCD"))
    out = tmp_path / "out"
    ours_log = tmp_path / "ours.log"
    environment = {**cli_environment(), "TOOLS": "ours", "OUR_GPUS": "5", "PER_GPU": "2",
                   "PYTHON": str(fake_python), "REAL_PYTHON": sys.executable,
                   "FAKE_OURS_LOG": str(ours_log), "PYTHONPATH": str(ROOT)}
    completed = subprocess.run(["bash", str(SCRIPT),
                                str(tmp_path), str(out), str(cases)], env=environment,
                               capture_output=True, text=True, timeout=120)
    lines = ours_log.read_text().splitlines()
    starts = [line.split() for line in lines if line.startswith("start ")]
    ends = sorted(float(line.split()[1]) for line in lines if line.startswith("end "))
    assert len(starts) == 4 and len(ends) == 4, completed.stderr[-2000:]
    assert sorted(next(w for w in words if w.startswith("^Model")) for words in starts) == [
        f"^Model{x}$" for x in "ABCD"]
    assert all("--devices=5" in words for words in starts)
    # Two lanes: never more than two cases at a time, each lane on cores of its own.
    times = sorted([(float(words[1]), 1) for words in starts] + [(end, -1) for end in ends])
    running = [sum(step for _, step in times[:index + 1]) for index in range(len(times))]
    assert max(running) == 2
    lanes = {words[2] for words in starts}
    assert len(lanes) == 2
    first, second = (set(cores.split(",")) for cores in lanes)
    assert not first & second
    start, end, gpus, count = (out / "ours-lanes.wall").read_text().split()
    assert (gpus, count) == ("1", "2") and float(end) - float(start) >= 2


@pytest.mark.parametrize("variables, message", [
    ({"PER_GPU": "0"}, "PER_GPU must be a whole number of at least 1, not '0'"),
    ({"PER_GPU": "two"}, "PER_GPU must be a whole number of at least 1, not 'two'"),
    ({"PER_GPU": "2", "LOCKSTEP": "1", "TOOLS": "both", "HARNESS_GPUS": "0", "OUR_GPUS": "1"},
     "LOCKSTEP=1 runs one case per GPU at a time: leave PER_GPU=2 out"),
])
def test_a_bad_per_gpu_is_named_with_a_non_zero_exit(fake_harness, tmp_path, variables, message):
    cases = tmp_path / "cases.txt"
    cases.write_text("huggingface ModelA 8 bf16 default eval\n")
    completed = run_fake_harness(fake_harness, tmp_path / "out", cases, **variables)
    assert completed.returncode == 2
    assert message in completed.stderr


def test_each_harness_case_compiles_in_an_empty_cache_folder_of_its_own(tmp_path):
    """With torch 2.11 the harness's --cold-start-latency keeps the host's default cache
    (importing dynamo sets TORCHINDUCTOR_CACHE_DIR): each case runs with the variable set
    to an empty folder of its own, removed after it, and without TRITON_CACHE_DIR, whatever
    the caller set; harness-env.txt names what was replaced."""
    harness = tmp_path / "harness"
    harness.mkdir()
    # The stand-in records what it sees and leaves a compiled artefact in its cache folder.
    (harness / "huggingface.py").write_text(
        "import os, sys\n"
        "output = sys.argv[sys.argv.index('--output') + 1]\n"
        "cache = os.environ.get('TORCHINDUCTOR_CACHE_DIR')\n"
        "seen = [cache, os.listdir(cache), os.environ.get('TRITON_CACHE_DIR'),\n"
        "        os.environ.get('KEPT')]\n"
        "open(os.path.join(cache, 'kernel.so'), 'w').close()\n"
        "with open(output, 'w') as file:\n"
        "    file.write(repr(seen))\n")
    cases = tmp_path / "cases.txt"
    cases.write_text("huggingface ModelA 8 bf16 default eval\n"
                     "huggingface ModelB 8 bf16 default eval\n")
    out = tmp_path / "out"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    completed = run_fake_harness(harness, out, cases, TORCHINDUCTOR_CACHE_DIR="/kept/inductor",
                                 TRITON_CACHE_DIR="/kept/triton", KEPT="yes",
                                 TMPDIR=str(scratch))
    folders = set()
    for model in ("ModelA", "ModelB"):
        csv = out / f"peer-huggingface-{model}-bs8-bf16-default-eval.csv"
        assert csv.is_file(), completed.stderr[-2000:]
        folder, contents, triton, kept = ast.literal_eval(csv.read_text())
        assert Path(folder).parent.parent == scratch and contents == []
        assert (triton, kept) == (None, "yes")
        folders.add(folder)
    assert len(folders) == 2 and list(scratch.iterdir()) == []
    recorded = (out / "harness-env.txt").read_text().splitlines()
    assert recorded == [
        "TORCHINDUCTOR_CACHE_DIR=/kept/inductor (replaced: each harness case gets an empty "
        "cache folder)",
        "TRITON_CACHE_DIR=/kept/triton (replaced: each harness case gets an empty cache folder)"]
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
    again = tmp_path / "again"
    subprocess.run(["bash", str(SCRIPT), str(harness), str(again),
                    str(cases)], env={**environment, "TOOLS": "harness",
                                      "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)},
                   capture_output=True, text=True, timeout=120, check=True)
    assert (again / "harness-env.txt").read_text() == ""


def test_a_run_stopped_mid_case_leaves_no_cache_folder_behind(tmp_path):
    """A run stopped at its time limit (SIGTERM to its process group) during a harness case
    removes the case's cache folder with the rest of the harness's caches."""
    harness = tmp_path / "harness"
    harness.mkdir()
    started = tmp_path / "started"
    (harness / "huggingface.py").write_text(
        "import os, pathlib, sys, time\n"
        "open(os.path.join(os.environ['TORCHINDUCTOR_CACHE_DIR'], 'kernel.so'), 'w').close()\n"
        f"pathlib.Path({str(started)!r}).touch()\n"
        "time.sleep(60)\n")
    cases = tmp_path / "cases.txt"
    cases.write_text("huggingface ModelA 8 bf16 default eval\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    run = subprocess.Popen(
        ["bash", str(SCRIPT), str(harness), str(tmp_path / "out"),
         str(cases)], start_new_session=True, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**cli_environment(), "TOOLS": "harness", "PYTHON": sys.executable,
             "PYTHONPATH": str(ROOT), "TMPDIR": str(scratch)})
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert run.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        assert list(scratch.rglob("kernel.so"))
        os.killpg(run.pid, signal.SIGTERM)
        assert run.wait(timeout=30) != 0
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert list(scratch.iterdir()) == []
