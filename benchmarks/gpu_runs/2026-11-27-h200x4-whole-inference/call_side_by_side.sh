#!/usr/bin/env bash
# GPU call (issue 21, whole-list table): harness on HGPUS and ours on OGPUS over CASES, side by
# side, each on its own share of cores, both timing on the fastest core (TIMING_CORE default);
# resumes from .ref/prev; stops after SECONDS; tars to $OUT.
# usage: .ref/call4.sh NAME CASES SECONDS
name=$1; cases=$2; seconds=$3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export PYTHONUNBUFFERED=1
d=/tmp/$name; mkdir -p $d/fid/ours
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv; nproc; lscpu -e=CPU,CORE,SOCKET 2>/dev/null | head -70; python3 -c "import torch,timm,transformers;print(torch.__version__,timm.__version__,transformers.__version__)"; git log -1 --format=%h 2>/dev/null; } > $d/versions.txt 2>&1
cp .ref/prev/fid/peer-* $d/fid/ 2>/dev/null
cp .ref/prev/fid/ours/results.jsonl $d/fid/ours/ 2>/dev/null
cp .ref/prev/fid/*.log $d/fid/ 2>/dev/null; cp .ref/prev/calls.txt $d/ 2>/dev/null
hgpus=${HGPUS:-0,1}; ogpus=${OGPUS:-2,3}
n_h=$(echo $hgpus | tr , '\n' | grep -c .); n_all=$(( n_h + $(echo $ogpus | tr , '\n' | grep -c .) ))
cores=$(nproc); hc=$(( cores * n_h / n_all ))
start=$(date +%s)
echo "call $name start $(date -u +%T)" >> $d/calls.txt
setsid taskset -c 0-$((hc-1)) env TOOLS=harness HARNESS_GPUS=$hgpus bash benchmarks/fidelity.sh .ref/dynamobench $d/fid $cases > $d/harness.log 2>&1 &
hp=$!
setsid taskset -c $hc-$((cores-1)) env TOOLS=ours OUR_GPUS=$ogpus bash benchmarks/fidelity.sh .ref/dynamobench $d/fid $cases > $d/ours.log 2>&1 &
op=$!
while [ $(( $(date +%s) - start )) -lt $seconds ] && { kill -0 $hp 2>/dev/null || kill -0 $op 2>/dev/null; }; do sleep 5; done
kill -TERM -- -$hp -$op 2>/dev/null; sleep 3; kill -KILL -- -$hp -$op 2>/dev/null
echo "stopped at $(( $(date +%s) - start )) s" >> $d/ours.log
echo "call $name end $(date -u +%T)" >> $d/calls.txt
nvidia-smi --query-gpu=index,clocks.sm,temperature.gpu,utilization.gpu --format=csv >> $d/versions.txt 2>&1
python3 benchmarks/fidelity_table.py $d/fid benchmarks/fidelity_cases_all.txt > $d/fid/table.md 2>&1
tar czf $OUT/$name.tgz -C /tmp $name
ls -la $OUT; tail -4 $d/harness.log; tail -8 $d/ours.log; grep -c . $d/fid/ours/results.jsonl; ls $d/fid | grep -c 'peer.*csv$'; grep -h 'harness_on_fast_core' $d/fid/peer-*.log | tail -3
