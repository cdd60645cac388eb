#!/usr/bin/env bash
# Issue 21, eleventh session, after the cold start moved onto the fastest core (ours: the
# core picker before the first compiled call; the harness: benchmarks/harness_on_fast_core.py
# picks before the harness starts): convnextv2_nano eval (pair A: the harness on GPU 0, ours
# on GPU 1) and MobileBertForMaskedLM eval (pair B: GPUs 2 and 3) at once, each tool
# compiling afresh every time: the harness three times one after the other
# (--cold-start-latency: a fresh cache each run; folders fidX, r1X, r2X), ours once with
# --process-caches=fresh (three processes, three compilations; fidX). Inductor's chosen
# configs are logged (TORCH_LOGS, "Best config for"). Tars to $OUT/NAME.tgz.
# usage: bash .ref/call11.sh NAME
name=$1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
d=/tmp/$name; mkdir -p $d
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv; nproc; python3 -c "import torch,timm,transformers;print(torch.__version__,timm.__version__,transformers.__version__)"; } > $d/versions.txt 2>&1
export TORCH_LOGS=+torch._inductor.runtime.triton_heuristics PYTHONUNBUFFERED=1
c=$(nproc); q=$(( c / 4 ))
printf 'timm convnextv2_nano 128 amp default eval\n' > $d/cases_A.txt
printf 'huggingface MobileBertForMaskedLM 256 bf16 default eval\n' > $d/cases_B.txt
echo "start $(date -u +%T)" >> $d/calls.txt
h() { # h PAIR GPU CORES
  for run in fid r1 r2; do
    taskset -c $3 env TOOLS=harness HARNESS_GPUS=$2 bash benchmarks/fidelity.sh .ref/dynamobench $d/$run$1 $d/cases_$1.txt >> $d/harness-$1.log 2>&1
    echo "harness $1 $run done $(date -u +%T)" >> $d/calls.txt
  done; }
o() { # o PAIR GPU CORES
  taskset -c $3 env TOOLS=ours OUR_GPUS=$2 OUR_FLAGS=--process-caches=fresh bash benchmarks/fidelity.sh .ref/dynamobench $d/fid$1 $d/cases_$1.txt >> $d/ours-$1.log 2>&1
  echo "ours $1 done $(date -u +%T)" >> $d/calls.txt; }
export -f h o; export d
timeout 530 bash -c "h A 0 0-$((q-1))" &
timeout 530 bash -c "o A 1 $q-$((2*q-1))" &
timeout 530 bash -c "h B 2 $((2*q))-$((3*q-1))" &
timeout 530 bash -c "o B 3 $((3*q))-$((c-1))" &
wait
echo "end $(date -u +%T)" >> $d/calls.txt
for f in $(find $d -name "*.log" -size +20M); do gzip $f; done
tar czf $OUT/$name.tgz -C /tmp $name
cat $d/calls.txt
for p in A B; do python3 benchmarks/fidelity_table.py $d/fid$p $d/cases_$p.txt --harness-again $d/r1$p --harness-again $d/r2$p 2>&1 | grep -v "^$" | tail -7; done
