#!/usr/bin/env bash
# GPU call: wheels, host-bound check, fidelity side by side (harness GPU0, ours GPU1), tar to $OUT.
# usage: .ref/call.sh NAME CASES SECONDS [bound]
name=$1; cases=$2; seconds=$3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export PYTHONUNBUFFERED=1
mkdir -p /tmp/$name
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; python3 -c "import torch,timm,transformers;print(torch.__version__,timm.__version__,transformers.__version__)"; } > /tmp/$name/versions.txt 2>&1
if [ "${4:-}" = bound ]; then
  CUDA_VISIBLE_DEVICES=1 timeout 120 python3 experiment_runner.py --suite-name=bound --accelerator=cuda --xla=None --dynamo=None --test=eval --no-progress --output-dirname /tmp/$name/bound > /tmp/$name/bound.log 2>&1
fi
[ -n "${PEERS:-}" ] && mkdir -p /tmp/$name/fid && cp $PEERS/peer-* /tmp/$name/fid/
HARNESS_GPU=${HGPU-0} OUR_GPUS=${OGPUS:-1} timeout $seconds bash benchmarks/fidelity.sh .ref/dynamobench /tmp/$name/fid $cases > /tmp/$name/fidelity.log 2>&1
echo "fidelity rc=$?" >> /tmp/$name/fidelity.log
tar czf $OUT/$name.tgz -C /tmp $name
tail -40 /tmp/$name/fidelity.log; cat /tmp/$name/fid/table.md 2>/dev/null | head -30
