#!/usr/bin/env bash
# Issue 21, eleventh session: after ours empties CUDA's caching allocator before each warm-up
# (as the harness does), convnextv2_nano eval compiled afresh twice by each tool at once: the
# harness on GPUs 0 and 2 (folders h0, h2), ours on GPUs 1 and 3 (o1, o3; one process each),
# with inductor's tuning logged (TORCH_LOGS: each configuration's timing and the one kept).
# Tars to $OUT/NAME.tgz.
# usage: bash .ref/call14.sh NAME
name=$1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
d=/tmp/$name; mkdir -p $d
export TORCH_LOGS=+torch._inductor.runtime.triton_heuristics PYTHONUNBUFFERED=1
c=$(nproc); q=$(( c / 4 ))
printf 'timm convnextv2_nano 128 amp default eval\n' > $d/cases.txt
run() { # run FOLDER TOOL GPU CORES
  if [ "$2" = harness ]; then gpus="HARNESS_GPUS=$3"; else gpus="OUR_GPUS=$3"; fi
  taskset -c $4 env TOOLS=$2 $gpus OUR_FLAGS=--processes=1 timeout 150 bash benchmarks/fidelity.sh .ref/dynamobench $d/$1 $d/cases.txt > $d/$1.log 2>&1; }
run h0 harness 0 0-$((q-1)) &
run o1 ours 1 $q-$((2*q-1)) &
run h2 harness 2 $((2*q))-$((3*q-1)) &
run o3 ours 3 $((3*q))-$((c-1)) &
wait
tar czf $OUT/$name.tgz -C /tmp $name
for f in h0 o1 h2 o3; do grep -h "cuda,convnext" $d/$f/peer-*eval.csv 2>/dev/null | cut -d, -f1-6; done
grep -h "convnextv2" $d/o*/table.md | head -2
