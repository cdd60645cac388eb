#!/usr/bin/env bash
# Two sweeps of CASES at the same time on one host: E (--timing-core=fastest) on GPU 0, F (--timing-core=any) on GPU 1,
# each pinned to its own half of the cores; bounded by SECONDS.
name=$1; cases=$2; seconds=$3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null && export PYTHONPATH=/tmp/site
export PYTHONUNBUFFERED=1
d=/tmp/$name; mkdir -p $d/E/ours $d/F/ours
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv; nproc; lscpu | grep -i "model name\|thread\|socket\|numa"; python3 -c "import torch,timm,transformers;print(torch.__version__,timm.__version__,transformers.__version__)"; } > $d/versions.txt 2>&1
mapfile -t shares < <(PYTHONPATH=$PYTHONPATH:. python3 -c 'import os
from core.cpus import cpu_list
from runner.plan.slots import split_cores
for share in split_cores(sorted(os.sched_getaffinity(0)), 2): print(cpu_list(share))')
echo "shares: ${shares[*]}" >> $d/versions.txt
date -u > $d/start
setsid taskset -c ${shares[0]} env TOOLS=ours OUR_GPUS=0 OUR_FLAGS="--timing-core=fastest" bash benchmarks/fidelity.sh .ref/dynamobench $d/E $cases > $d/E.log 2>&1 &
e=$!
setsid taskset -c ${shares[1]} env TOOLS=ours OUR_GPUS=1 OUR_FLAGS="--timing-core=any" bash benchmarks/fidelity.sh .ref/dynamobench $d/F $cases > $d/F.log 2>&1 &
f=$!
start=$(date +%s)
while [ $(( $(date +%s) - start )) -lt $seconds ] && { kill -0 $e 2>/dev/null || kill -0 $f 2>/dev/null; }; do sleep 2; done
kill -TERM -- -$e -$f 2>/dev/null; sleep 2; kill -KILL -- -$e -$f 2>/dev/null
echo "stopped at $(( $(date +%s) - start )) s" >> $d/versions.txt
tar czf $OUT/${name}.tgz -C /tmp $name
tail -1 $d/versions.txt; grep -c . $d/E/ours/results.jsonl $d/F/ours/results.jsonl; grep -h "median/iter" -A8 $d/E/ours-*.log $d/F/ours-*.log | grep cuda
