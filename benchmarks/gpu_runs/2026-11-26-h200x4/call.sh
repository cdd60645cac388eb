#!/usr/bin/env bash
# GPU call: wheels, versions, fidelity side by side (harness on HGPUS, ours on OGPUS), tar to $OUT.
# usage: .ref/call2.sh NAME CASES SECONDS [PREV_DIR]   (PREV_DIR: an earlier call's fid folder to resume)
name=$1; cases=$2; seconds=$3; prev=${4:-}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export PYTHONUNBUFFERED=1
mkdir -p /tmp/$name/fid/ours
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv; nproc; python3 -c "import torch,timm,transformers;print(torch.__version__,timm.__version__,transformers.__version__)"; } > /tmp/$name/versions.txt 2>&1
if [ -n "$prev" ] && [ -d "$prev" ]; then
  cp "$prev"/peer-*.csv /tmp/$name/fid/ 2>/dev/null
  cp "$prev"/ours/results.jsonl /tmp/$name/fid/ours/ 2>/dev/null
fi
HARNESS_GPUS=${HGPUS:-0,1} OUR_GPUS=${OGPUS:-2,3} timeout $seconds bash benchmarks/fidelity.sh .ref/dynamobench /tmp/$name/fid $cases > /tmp/$name/fidelity.log 2>&1
echo "fidelity rc=$? at $(date -u +%T)" >> /tmp/$name/fidelity.log
python3 benchmarks/fidelity_table.py /tmp/$name/fid $cases > /tmp/$name/fid/table.md 2>&1

tar czf $OUT/$name.tgz -C /tmp $name
ls -la $OUT; tail -15 /tmp/$name/fidelity.log; tail -8 /tmp/$name/fid/table.md
