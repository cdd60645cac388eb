#!/usr/bin/env bash
# GPU call for issue 22's stability table: ours alone on OGPUS (default 0,1,2,3) over CASES into
# /tmp/NAME/SWEEP (resumed from .ref/prev/SWEEP), for SECONDS; tar to $OUT.
# usage: .ref/call_stab.sh NAME SWEEP CASES SECONDS      (SWEEP: A or B, two sweeps minutes apart)
name=$1; sweep=$2; cases=$3; seconds=$4
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null && export PYTHONPATH=/tmp/site
export PYTHONUNBUFFERED=1
# fidelity.sh times ours on any core unless told: the stability table is the default's (fastest)
export OUR_FLAGS="${OUR_FLAGS:---timing-core=fastest}"
d=/tmp/$name; mkdir -p $d/$sweep/ours
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv; nproc; lscpu -e=CPU,CORE,SOCKET 2>/dev/null | head -70; python3 -c "import torch,timm,transformers;print(torch.__version__,timm.__version__,transformers.__version__)"; } > $d/versions.txt 2>&1
timeout 40 python3 .ref/cpumap.py 0,3 $d/cpumap_before.json > $d/cpumap_before.txt 2>&1
cp .ref/prev/$sweep/ours/results.jsonl $d/$sweep/ours/ 2>/dev/null
setsid env TOOLS=ours OUR_GPUS=${OGPUS:-0,1,2,3} bash benchmarks/fidelity.sh .ref/dynamobench $d/$sweep $cases > $d/$sweep.log 2>&1 &
op=$!; start=$(date +%s)
while [ $(( $(date +%s) - start )) -lt $seconds ] && kill -0 $op 2>/dev/null; do sleep 5; done
kill -TERM -- -$op 2>/dev/null; sleep 3; kill -KILL -- -$op 2>/dev/null
echo "stopped at $(( $(date +%s) - start )) s" >> $d/$sweep.log
timeout 30 python3 .ref/cpumap.py 0,3 $d/cpumap_after.json > $d/cpumap_after.txt 2>&1
tar czf $OUT/$name.tgz -C /tmp $name
ls -la $OUT; tail -6 $d/$sweep.log; grep -c . $d/$sweep/ours/results.jsonl
