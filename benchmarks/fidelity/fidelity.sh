#!/usr/bin/env bash
# Run PyTorch's own dynamo harness and ours on the same models, precision, batch size, inductor
# mode and test (inference or training), and print the two side by side.
#
#   benchmarks/fidelity/fidelity.sh HARNESS_DIR OUT_DIR [CASES_FILE]
#
# HARNESS_DIR: a copy of PyTorch's benchmarks/dynamo harness (shared/reference/dynamobench).
# CASES_FILE: lines of "suite model batch_size precision mode [test]" (suite: huggingface|timm;
# precision: fp32|fp16|bf16|amp; mode: default|cudagraphs; test: eval|train, eval when left
# out); default: benchmarks/fidelity/fidelity_cases.txt. python -m
# benchmarks.fidelity.fidelity_cases writes the cases of both whole lists
# (benchmarks/fidelity/fidelity_cases_all.txt), or draws them (--sample N --seed S), and maps a
# case to each tool's flags (--flags: the harness's --float32|--float16|--bfloat16|--amp,
# --inference|--training, --batch-size and --disable-cudagraphs outside the cudagraphs mode;
# ours --precision, --mode, --test and --batch-size where it is not the list's own).
# The harness's files are named peer-<suite>-<model>-bs<batch>-<precision>-<mode>-<test>.
# Both run 30 timed repeats (REPEAT), eager and compiled interleaved in one process.
#
# Side by side: with HARNESS_GPUS and OUR_GPUS set (comma lists of CUDA device numbers;
# HARNESS_GPU, one number, as before), the harness runs the cases on HARNESS_GPUS, one stream
# per GPU taking every n-th case in the file's order, while ours runs them at the same time on
# OUR_GPUS, one experiment per GPU (--devices, --jobs). Without them both run one after the
# other on the machine's first GPU. Side by side, each GPU's user gets cores of its own (taskset):
# the host's cores split evenly over the GPUs in use, in whole physical cores (SMT siblings
# together), each harness stream pinned to its share, ours to the rest (its --jobs split them
# again, the same way), so that one tool's compiling never lands on the cores, or the
# sibling threads, another one is timing on. Ours runs one invocation per suite, precision, mode and
# test where every case's batch size is the suite's default (the lists' own), so that --jobs
# keeps every GPU busy; else one per batch size. Every raw output stays under OUT_DIR: the harness's CSV
# and log per case (peer-*), our results file (ours/results.jsonl) and logs (ours-*.log), and
# each harness case's and each of our invocations' start and end (peer-*.wall, ours-*.wall:
# benchmarks/cost/sweep_cost.py compares the two tools' cost with them).
# TOOLS=harness or TOOLS=ours runs one tool only (default both), so that two invocations, each
# pinned to its own GPUs and cores, can run different cases files side by side into one OUT_DIR.
# LOCKSTEP=1 (with as many HARNESS_GPUS as OUR_GPUS; the default when both tools run and the
# lists are that long): both tools run each case at the same time, lane k on the k-th GPU of
# each list (each tool on its own cores), the lane's next case once both have ended; ours in
# one invocation per case (ours-case-*). A host whose speed moves over minutes then meets both
# tools alike on every case. LOCKSTEP=0: each tool goes at its own pace (ours in one invocation
# per group of cases, as a sweep runs), and a case's two figures can be minutes apart.
# PER_CASE=1: ours in one invocation per case, one case after the other on one GPU (its
# start-up in each case's wall: what checking one model costs).
# PER_GPU=K (K > 1; not with LOCKSTEP=1): ours runs K cases at a time on each of OUR_GPUS, each
# case an invocation of its own on a share of ours' CPUs of its own (lanes); the lanes of a GPU
# take turns on the card through our runner's GPU gate, one compiling while another times, as
# --experiments-per-gpu=K does within one invocation. ours-lanes.wall: the lanes' start, end,
# GPU and lane counts; peer-streams.wall: the harness streams' start, end and GPU count.
# OUR_FLAGS: more flags for our runner, words split on spaces (say "--processes=5
# --process-caches=fresh"); a flag not given keeps its default.
# TIMING_CORE: where both tools' launching threads run while they time (default any).
# any: both leave that thread to the scheduler: the harness as its users run it (plain
# `python huggingface.py ...`), ours at its default (--timing-core=any). fastest: ours with
# --timing-core=fastest, the harness through benchmarks/fidelity/harness_on_fast_core.py, which
# pins its main thread as our runner pins ours (at its first timed run, and again after a slow host
# pulse) and leaves its code as it is; so on a host whose cores change speed from second to
# second both time at its fast speed.
# HARNESS_RUNS (default 2): the harness runs each case this many times, one after the other,
# each plainly and cold (below), so that the table shows the harness's own spread and counts a
# row as agreeing within the harness's own band (benchmarks/fidelity/fidelity_table.py); the first
# run's files are peer-NAME.*, the K-th's peer-NAME-runK.*.
# Each harness case compiles cold, as its --cold-start-latency asks: it runs with
# TORCHINDUCTOR_CACHE_DIR set to an empty folder of its own (removed after it), and without
# TRITON_CACHE_DIR, so that Triton's kernels go into that folder too. The flag alone does not
# do it with torch 2.11: importing torch._dynamo sets TORCHINDUCTOR_CACHE_DIR to the host's
# default folder (TMPDIR/torchinductor_USER), and the flag makes a fresh cache only where the
# variable is unset, so a case run a second time on a host would load what its first run
# compiled and tuned, its compile time and wall several times shorter. harness-env.txt records
# the caller's cache variables that were replaced. Ours gives each experiment caches of its
# own: the script unsets EXPERIMENT_RUNNER_COMPILE_CACHE (--compile-cache's variable).
# Our runner needs jsonlines: where it is missing, it is installed from the wheels in
# .whl/ of this checkout (pip download jsonlines attrs --no-deps -d .whl), offline.
set -uo pipefail
unset EXPERIMENT_RUNNER_COMPILE_CACHE
harness=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
cases=${3:-$root/benchmarks/fidelity/fidelity_cases.txt}
case "$cases" in /*) ;; *) cases="$PWD/$cases" ;; esac
python=${PYTHON:-python3}
repeat=${REPEAT:-30}
harness_gpus=${HARNESS_GPUS:-${HARNESS_GPU:-}}
harness_runs=${HARNESS_RUNS:-2}
our_gpus=${OUR_GPUS:-}
tools=${TOOLS:-both}
timing_core=${TIMING_CORE:-any}
lockstep=${LOCKSTEP:-auto}
per_gpu=${PER_GPU:-1}
per_case=${PER_CASE:-0}
case "$per_case" in 0|1) ;; *) echo "PER_CASE must be 0 or 1, not '$per_case'" >&2; exit 2 ;; esac
case "$per_gpu" in ''|*[!0-9]*|0) echo "PER_GPU must be a whole number of at least 1, not '$per_gpu'" >&2; exit 2 ;; esac
case "$harness_runs" in ''|*[!0-9]*|0) echo "HARNESS_RUNS must be a whole number of at least 1, not '$harness_runs'" >&2; exit 2 ;; esac
read -r -a our_flags <<< "${OUR_FLAGS:-}"
case "$tools" in both|harness|ours) ;; *) echo "TOOLS must be both, harness or ours, not '$tools'" >&2; exit 2 ;; esac
if [ "$tools" != ours ]; then
  for name in TORCHINDUCTOR_CACHE_DIR TRITON_CACHE_DIR; do
    [ -n "${!name+set}" ] && echo "$name=${!name} (replaced: each harness case gets an empty" \
      "cache folder)"
  done > "$out/harness-env.txt"
  # The harness cases' cache folders, made in this one, go with it when the script ends,
  # however it ends (a run stopped at its time limit included).
  harness_caches=$(mktemp -d "${TMPDIR:-/tmp}/harness-caches.XXXXXX") \
    || { echo "cannot make a folder for the harness's caches in ${TMPDIR:-/tmp}" >&2; exit 2; }
  trap 'rm -rf "$harness_caches"' EXIT
fi
case "$timing_core" in
  fastest) harness_launcher=("$python" "$root/benchmarks/fidelity/harness_on_fast_core.py") ;;
  any) harness_launcher=("$python") ;;
  *) echo "TIMING_CORE must be fastest or any, not '$timing_core'" >&2; exit 2 ;;
esac

"$python" -c "import jsonlines" 2>/dev/null \
  || "$python" -m pip install --quiet --no-index --find-links "$root/.whl" jsonlines \
  || { echo "our runner needs jsonlines: put its wheel (and attrs') in $root/.whl" >&2; exit 2; }

# The cases, one per line: suite model batch precision mode test.
case_lines() {
  grep -v '^\s*#' "$cases" | while read -r suite model batch precision mode test; do
    [ -n "${suite:-}" ] && echo "$suite $model $batch $precision $mode ${test:-eval}"
  done
}

# harness_case SUITE MODEL BATCH PRECISION MODE TEST: the harness on one case, plainly (a case
# with a CSV already in OUT_DIR is left as it is).
harness_case() {
  local suite=$1 model=$2 batch=$3 precision=$4 mode=$5 test=$6 peer_model=$2 script cache
  case "$suite" in
    huggingface) script=huggingface.py ;;
    timm) script=timm_models.py
      # The harness names some timm models with their pretrained tag (name.tag).
      peer_model=$(awk -v m="$model" '$1 == m || index($1, m ".") == 1 {print $1; exit}' \
        "$harness/timm_models_list.txt")
      peer_model=${peer_model:-$model} ;;
    *) echo "unknown suite $suite" >&2; return ;;
  esac
  # The case's precision, test, batch size and mode as the harness's flags.
  flags_text=$(cd "$root" && "$python" -m benchmarks.fidelity.fidelity_cases --flags harness \
    "$precision" \
    "$mode" "$test" "$batch" </dev/null) || { echo "not a case: $suite $model $batch $precision $mode $test" >&2; return; }
  read -r -a peer_flags <<< "$flags_text"
  name="$suite-$model-bs$batch-$precision-$mode-$test"
  local run stem
  for run in $(seq 1 "$harness_runs"); do
    # The first run's files are peer-NAME.*, the later ones' peer-NAME-runK.*.
    stem="peer-$name"
    [ "$run" = 1 ] || stem="peer-$name-run$run"
    echo "== harness: $suite $model bs=$batch $precision $mode $test (run $run of $harness_runs)" >&2
    [ -s "$out/$stem.csv" ] && continue
    cache=$(mktemp -d "$harness_caches/case.XXXXXX") \
      || { echo "cannot make a cache folder for $name in $harness_caches" >&2; return; }
    started=$(date +%s.%N)
    (cd "$harness" && env -u TRITON_CACHE_DIR TORCHINDUCTOR_CACHE_DIR="$cache" \
        "${harness_launcher[@]}" "$script" --performance \
        "${peer_flags[@]}" --backend inductor --device cuda --only "$peer_model" \
        --cold-start-latency --repeat "$repeat" \
        --output "$out/$stem.csv" >"$out/$stem.log" 2>&1) \
      || echo "harness failed on $name (run $run): see $stem.log" >&2
    # The run's wall, start and end (benchmarks/cost/sweep_cost.py reads the first run's).
    echo "$started $(date +%s.%N)" > "$out/$stem.wall"
    rm -rf "$cache"
  done
}

# run_harness [STREAM STREAMS]: the cases, or every STREAMS-th of them from the STREAM-th (0-based).
run_harness() {
  local stream=${1:-0} streams=${2:-1}
  case_lines | awk -v k="$stream" -v n="$streams" '(NR - 1) % n == k' |
  while read -r suite model batch precision mode test; do
    harness_case "$suite" "$model" "$batch" "$precision" "$mode" "$test"
  done
}

# The suite's default batch size of each of its models, "model batch" lines.
default_batches() {
  (cd "$root" && "$python" experiment_runner.py --suite-name="$1" --list-models 2>/dev/null) \
    | awk -F'\t' 'NF == 2 {print $1, $2}'
}

# The default batch size of each model of the cases' suites, "suite model batch" lines.
suites_default_batches() {
  for suite in $(case_lines | awk '{print $1}' | sort -u); do
    default_batches "$suite" | sed "s/^/$suite /"
  done
}

# Ours: one runner invocation per suite, precision and mode when every case of that group asks
# for its model's default batch size (so --jobs spreads the whole group over OUR_GPUS), else one
# per batch size as well; one for all the group's tests where every model of it runs every test
# (the product a sweep runs: --test given once per test), else one per test.
run_ours() {
  local devices=() jobs=1
  if [ -n "$our_gpus" ]; then
    devices=(--devices="$our_gpus")
    jobs=$(echo "$our_gpus" | tr ',' '\n' | grep -c .)
  fi
  # This invocation's own groups: another one may run other cases into the same OUT_DIR.
  local defaults groups="$out/.ours-groups.$$" members tests models
  defaults=$(suites_default_batches)
  case_lines | while read -r suite model batch precision mode test; do
    if echo "$defaults" | grep -qx "$suite $model $batch"; then
      echo "$suite default $precision $mode $test $model"
    else
      echo "$suite $batch $precision $mode $test $model"
    fi
  done > "$groups"
  awk '{print $1, $2, $3, $4}' "$groups" | awk '!seen[$0]++' |
  while read -r suite batch precision mode; do
    members=$(awk -v s="$suite" -v b="$batch" -v p="$precision" -v m="$mode" \
      '$1 == s && $2 == b && $3 == p && $4 == m {print $5, $6}' "$groups" | sort -u)
    tests=$(echo "$members" | awk '{print $1}' | sort -u)
    models=$(echo "$members" | awk '{print $2}' | awk '!seen[$0]++')
    if [ "$(echo "$members" | wc -l)" -eq $(( $(echo "$tests" | wc -l) * $(echo "$models" | wc -l) )) ]; then
      ours_group "$suite" "$batch" "$precision" "$mode" "$(echo $tests)" "$(echo $models)"
    else
      for test in $tests; do
        ours_group "$suite" "$batch" "$precision" "$mode" "$test" \
          "$(echo "$members" | awk -v t="$test" '$1 == t {print $2}' | xargs)"
      done
    fi
  done
}

# ours_group SUITE BATCH PRECISION MODE "TESTS" "MODELS": one invocation of our runner for
# every model and test of the lists (BATCH: default, or a batch size), on run_ours' GPUs.
ours_group() {
  local suite=$1 batch=$2 precision=$3 mode=$4 filters=() test_flags=() batch_flag=()
  for model in $6; do filters+=(-k "^$model\$"); done
  for test in $5; do test_flags+=(--test="$test"); done
  [ "$batch" = default ] || batch_flag=(--batch-size="$batch")
  local group="$suite-bs$batch-$precision-$mode-${5// /+}"
  echo "== ours: $group ($(( ${#filters[@]} / 2 )) models)" >&2
  our_invocation "$group" "$jobs" --suite-name="$suite" "${filters[@]}" --mode="$mode" \
    "${test_flags[@]}" --precision="$precision" "${batch_flag[@]}" --jobs="$jobs" "${devices[@]}"
}

# our_invocation NAME GPUS FLAGS...: our runner with FLAGS on CUDA with inductor, at the
# settings both tools share (REPEAT timed runs, 3 warm-up iterations, TIMING_CORE), then
# OUR_FLAGS, into OUT_DIR/ours; its output in ours-NAME.log, its start, end and GPU count in
# ours-NAME.wall (benchmarks/cost/sweep_cost.py reads them).
our_invocation() {
  local name=$1 gpus=$2 started
  shift 2
  started=$(date +%s.%N)
  (cd "$root" && "$python" experiment_runner.py "$@" --accelerator=cuda --xla=None \
      --dynamo=inductor --repeat="$repeat" --warmup=3 --timing-core="$timing_core" \
      "${our_flags[@]}" --no-progress --output-dirname="$out/ours" >>"$out/ours-$name.log" 2>&1) \
    || echo "ours failed in $name: see ours-$name.log" >&2
  echo "$started $(date +%s.%N) $gpus" > "$out/ours-$name.wall"
}

# ours_case GPU SUITE MODEL BATCH PRECISION MODE TEST: our runner on one case, on one GPU, in an
# invocation of its own (its start-up counted in the case's wall: ours-case-NAME.wall).
ours_case() {
  local gpu=$1 suite=$2 model=$3 batch=$4 precision=$5 mode=$6 test=$7 batch_flag=()
  grep -qx "$suite $model $batch" "$out/.default-batches.$$" || batch_flag=(--batch-size="$batch")
  echo "== ours: $suite $model bs=$batch $precision $mode $test" >&2
  our_invocation "case-$suite-$model-bs$batch-$precision-$mode-$test" 1 --suite-name="$suite" \
    -k "^$model\$" --mode="$mode" --test="$test" --precision="$precision" "${batch_flag[@]}" \
    --jobs=1 --devices="$gpu"
}

# run_lockstep: lane k of the GPU pairs (HARNESS_GPUS[k], OUR_GPUS[k]) takes every n-th case
# from the k-th; both tools start each case together, each on its GPU and cores, and the lane's
# next case starts when both have ended. So both time a case in the same minutes of the host.
run_lockstep() {
  local lanes=${#harness_list[@]} lane
  # Each suite's default batch sizes, once, before any case starts.
  suites_default_batches > "$out/.default-batches.$$"
  for lane in $(seq 0 $(( lanes - 1 ))); do
    ( case_lines | awk -v k="$lane" -v n="$lanes" '(NR - 1) % n == k' |
      while read -r suite model batch precision mode test; do
        ( pin "${shares[$lane]:-}"
          CUDA_VISIBLE_DEVICES=${harness_list[$lane]} \
            harness_case "$suite" "$model" "$batch" "$precision" "$mode" "$test" ) &
        ( pin "${shares[$(( lanes + lane ))]:-}"
          ours_case "${our_list[$lane]}" "$suite" "$model" "$batch" "$precision" "$mode" "$test" ) &
        wait
      done ) &
  done
  wait
}

# run_ours_per_case: PER_CASE=1, ours in one invocation per case (what a user types to check
# one model), one after the other on the first GPU of OUR_GPUS (0 without it); each case's
# wall, start-up included, in ours-case-NAME.wall.
run_ours_per_case() {
  local gpu=${our_gpus%%,*}
  suites_default_batches > "$out/.default-batches.$$"
  case_lines | while read -r suite model batch precision mode test; do
    ours_case "${gpu:-0}" "$suite" "$model" "$batch" "$precision" "$mode" "$test"
  done
}

# run_ours_lanes: PER_GPU cases at a time on each GPU of OUR_GPUS (lanes), each lane on a share
# of ours' CPUs of its own, each case an invocation of its own (ours_case), taken in the file's
# order as a lane frees up. The lanes of a GPU take turns on the card through our runner's GPU
# gate (one compiles on its cores while another times). Its start, end, GPU count and lane
# count: ours-lanes.wall.
run_ours_lanes() {
  local gpus lanes lane queue="$out/.ours-queue.$$"
  IFS=, read -ra gpus <<< "$our_gpus"
  lanes=$(( ${#gpus[@]} * per_gpu ))
  suites_default_batches > "$out/.default-batches.$$"
  mapfile -t lane_cpus < <(core_shares "$lanes")
  case_lines > "$queue"
  echo 0 > "$queue.next"
  local started
  started=$(date +%s.%N)
  for lane in $(seq 0 $(( lanes - 1 ))); do
    ( pin "${lane_cpus[$lane]:-}"
      while next=$(next_case "$queue"); do
        read -r suite model batch precision mode test <<< "$next"
        ours_case "${gpus[$(( lane % ${#gpus[@]} ))]}" "$suite" "$model" "$batch" "$precision" \
          "$mode" "$test"
      done ) &
  done
  wait
  echo "$started $(date +%s.%N) ${#gpus[@]} $lanes" > "$out/ours-lanes.wall"
}

# next_case QUEUE: the queue's next case (its line), or a failure once none is left.
next_case() {
  (
    flock 9
    local taken line
    taken=$(cat "$1.next")
    line=$(sed -n "$(( taken + 1 ))p" "$1")
    [ -n "$line" ] || exit 1
    echo $(( taken + 1 )) > "$1.next"
    echo "$line"
  ) 9>"$1.lock"
}

# pin LIST: this (sub)shell, and so what it starts, on the CPUs of LIST (taskset).
pin() {
  [ -n "$1" ] && command -v taskset >/dev/null && taskset -cp "$1" "$BASHPID" >/dev/null
}

# core_shares N: N disjoint shares of this process's CPUs, one CPU list per line, made of
# whole physical cores where there are enough (our runner's own split: runner/plan/slots.py).
core_shares() {
  (cd "$root" && "$python" -c 'import os, sys
from core.host.cpus import cpu_list
from runner.plan.slots import split_cores
for share in split_cores(sorted(os.sched_getaffinity(0)), int(sys.argv[1])):
    print(cpu_list(share))' "$1")
}

# harness_streams: one harness stream per GPU of harness_list in the background, stream i on
# the CPUs of shares[i], so that one stream's compile workers never run on the cores another
# stream (or tool) is timing on; their process ids in harness_pids.
harness_streams() {
  harness_pids=()
  harness_started=$(date +%s.%N)
  for index in "${!harness_list[@]}"; do
    ( pin "${shares[$index]:-}"
      CUDA_VISIBLE_DEVICES=${harness_list[$index]} run_harness "$index" "${#harness_list[@]}" ) &
    harness_pids+=($!)
  done
}

case "$lockstep" in
  auto) # the default: lockstep where both tools run and each has as many GPUs as the other
    lockstep=0
    if [ "$tools" = both ] && [ "$per_gpu" = 1 ] && [ -n "$harness_gpus" ] && [ -n "$our_gpus" ] \
        && [ "$(echo "$harness_gpus" | tr ',' '\n' | grep -c .)" = \
             "$(echo "$our_gpus" | tr ',' '\n' | grep -c .)" ]; then
      lockstep=1
    fi ;;
  0) ;;
  1) [ "$per_gpu" = 1 ] || { echo "LOCKSTEP=1 runs one case per GPU at a time: leave PER_GPU=$per_gpu out" >&2; exit 2; } ;;
  *) echo "LOCKSTEP must be 0 or 1, not '$lockstep'" >&2; exit 2 ;;
esac
if [ "$lockstep" = 1 ]; then
  IFS=, read -ra harness_list <<< "$harness_gpus"
  IFS=, read -ra our_list <<< "$our_gpus"
  [ "${#harness_list[@]}" -gt 0 ] && [ "${#harness_list[@]}" = "${#our_list[@]}" ] \
    || { echo "LOCKSTEP=1 needs as many HARNESS_GPUS as OUR_GPUS (one pair a lane)" >&2; exit 2; }
  mapfile -t shares < <(core_shares $(( 2 * ${#harness_list[@]} )))
  run_lockstep
elif [ "$tools" = harness ]; then
  # One stream per GPU of HARNESS_GPUS (the machine's first GPU without it).
  IFS=, read -ra harness_list <<< "${harness_gpus:-0}"
  mapfile -t shares < <(core_shares "${#harness_list[@]}")
  harness_streams
  wait "${harness_pids[@]}"
elif [ "$tools" = ours ]; then
  if [ "$per_case" = 1 ]; then run_ours_per_case
  elif [ "$per_gpu" -gt 1 ]; then run_ours_lanes; else run_ours; fi
elif [ -n "$harness_gpus" ] && [ -n "$our_gpus" ]; then
  IFS=, read -ra harness_list <<< "$harness_gpus"
  IFS=, read -ra our_list <<< "$our_gpus"
  mapfile -t shares < <(core_shares $(( ${#harness_list[@]} + ${#our_list[@]} )))
  harness_streams
  ours_cpus=$(IFS=,; echo "${shares[*]:${#harness_list[@]}}")
  if [ "$per_gpu" -gt 1 ]; then
    ( pin "$ours_cpus"; run_ours_lanes )
  else
    ( pin "$ours_cpus"; run_ours )
  fi
  wait "${harness_pids[@]}"
  echo "$harness_started $(date +%s.%N) ${#harness_list[@]}" > "$out/peer-streams.wall"
else
  # One after the other on the machine's first GPU, each tool with all its cores.
  harness_started=$(date +%s.%N)
  run_harness
  echo "$harness_started $(date +%s.%N) 1" > "$out/peer-streams.wall"
  if [ "$per_case" = 1 ]; then run_ours_per_case; else run_ours; fi
fi
(cd "$root" && "$python" -m benchmarks.fidelity.fidelity_table "$out" "$cases") \
  | tee "$out/table.md"
