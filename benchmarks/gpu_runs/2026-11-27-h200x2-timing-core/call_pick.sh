#!/usr/bin/env bash
# One sweep (SWEEP) of CASES on GPUs 0,1 bounded by SECONDS; OUR_FLAGS passes through; MAP=1 adds a CPU map after.
name=$1; sweep=$2; cases=$3; seconds=$4
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null && export PYTHONPATH=/tmp/site
export PYTHONUNBUFFERED=1
d=/tmp/$name; mkdir -p $d/$sweep/ours
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv; nproc; lscpu | grep -i "model name\|thread\|socket\|numa"; python3 -c "import torch,timm,transformers;print(torch.__version__,timm.__version__,transformers.__version__)"; } > $d/versions_$sweep.txt 2>&1
date -u > $d/$sweep.start
setsid env TOOLS=ours OUR_GPUS=${GPUS:-0,1} bash benchmarks/fidelity.sh .ref/dynamobench $d/$sweep $cases > $d/$sweep.log 2>&1 &
op=$!; start=$(date +%s)
while [ $(( $(date +%s) - start )) -lt $seconds ] && kill -0 $op 2>/dev/null; do sleep 2; done
kill -TERM -- -$op 2>/dev/null; sleep 2; kill -KILL -- -$op 2>/dev/null
echo "stopped at $(( $(date +%s) - start )) s" >> $d/$sweep.log
if [ "${MAP:-0}" = 1 ]; then PYTHONPATH=$PYTHONPATH:. timeout 25 python3 benchmarks/host_cpu_map.py --cuda 0 --json $d/cpumap_$sweep.json > $d/cpumap_$sweep.txt 2>&1; fi
tar czf $OUT/${name}_$sweep.tgz -C /tmp $name
tail -3 $d/$sweep.log; grep -c . $d/$sweep/ours/results.jsonl; grep -rh "fresh interpreters" $d/$sweep/*.log | head -3; tail -1 $d/cpumap_*.txt 2>/dev/null
