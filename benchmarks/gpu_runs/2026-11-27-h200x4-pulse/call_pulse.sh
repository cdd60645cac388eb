#!/usr/bin/env bash
# Two sweeps (C then D) of CASES in one call, each bounded by SECONDS, with a CPU map between.
name=$1; cases=$2; seconds=$3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null && export PYTHONPATH=/tmp/site
export PYTHONUNBUFFERED=1
d=/tmp/$name; mkdir -p $d
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv; nproc; python3 -c "import torch,timm,transformers;print(torch.__version__,timm.__version__,transformers.__version__)"; } > $d/versions.txt 2>&1
for sweep in C D; do
  mkdir -p $d/$sweep/ours
  date -u > $d/$sweep.start
  setsid env TOOLS=ours OUR_GPUS=0,1,2,3 bash benchmarks/fidelity.sh .ref/dynamobench $d/$sweep $cases > $d/$sweep.log 2>&1 &
  op=$!; start=$(date +%s)
  while [ $(( $(date +%s) - start )) -lt $seconds ] && kill -0 $op 2>/dev/null; do sleep 3; done
  kill -TERM -- -$op 2>/dev/null; sleep 2; kill -KILL -- -$op 2>/dev/null
  echo "stopped at $(( $(date +%s) - start )) s" >> $d/$sweep.log
  PYTHONPATH=$PYTHONPATH:. timeout 25 python3 benchmarks/host_cpu_map.py --cuda 0 --json $d/cpumap_$sweep.json > $d/cpumap_$sweep.txt 2>&1
  tar czf $OUT/${name}_$sweep.tgz -C /tmp $name
done
ls -la $OUT; tail -3 $d/C.log $d/D.log; grep -c . $d/C/ours/results.jsonl $d/D/ours/results.jsonl; tail -1 $d/cpumap_*.txt
