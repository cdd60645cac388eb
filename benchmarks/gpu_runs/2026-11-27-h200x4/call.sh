#!/usr/bin/env bash
# GPU call: harness on HGPUS (cases HCASES), ours on OGPUS (cases OCASES, then a second sweep of
# BCASES into fidB for stability), each pinned to its share of cores, for SECONDS; tar to $OUT.
# usage: .ref/call3.sh NAME HCASES OCASES BCASES SECONDS   (resumes from .ref/prev)
name=$1; hcases=$2; ocases=$3; bcases=$4; seconds=$5
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export PYTHONUNBUFFERED=1
d=/tmp/$name; mkdir -p $d/fid/ours $d/fidB/ours
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv; nproc; lscpu -e=CPU,CORE,SOCKET 2>/dev/null | head -70; python3 -c "import torch,timm,transformers;print(torch.__version__,timm.__version__,transformers.__version__)"; } > $d/versions.txt 2>&1
cp .ref/prev/fid/peer-*.csv $d/fid/ 2>/dev/null
cp .ref/prev/fid/ours/results.jsonl $d/fid/ours/ 2>/dev/null
cp .ref/prev/fidB/ours/results.jsonl $d/fidB/ours/ 2>/dev/null
hgpus=${HGPUS:-0}; ogpus=${OGPUS:-1,2,3}
n_h=$(echo $hgpus | tr , '\n' | grep -c .); n_all=$(( n_h + $(echo $ogpus | tr , '\n' | grep -c .) ))
cores=$(nproc); hc=$(( cores * n_h / n_all ))
start=$(date +%s)
setsid taskset -c 0-$((hc-1)) env TOOLS=harness HARNESS_GPUS=$hgpus bash benchmarks/fidelity.sh .ref/dynamobench $d/fid $hcases > $d/harness.log 2>&1 &
hp=$!
setsid taskset -c $hc-$((cores-1)) bash -c "TOOLS=ours OUR_GPUS=$ogpus bash benchmarks/fidelity.sh .ref/dynamobench $d/fid $ocases; echo '== sweep B'; TOOLS=ours OUR_GPUS=$ogpus bash benchmarks/fidelity.sh .ref/dynamobench $d/fidB $bcases" > $d/ours.log 2>&1 &
op=$!
while [ $(( $(date +%s) - start )) -lt $seconds ] && { kill -0 $hp 2>/dev/null || kill -0 $op 2>/dev/null; }; do sleep 5; done
kill -TERM -- -$hp -$op 2>/dev/null; sleep 3; kill -KILL -- -$hp -$op 2>/dev/null
echo "stopped at $(( $(date +%s) - start )) s" >> $d/ours.log
nvidia-smi --query-gpu=index,clocks.sm,temperature.gpu,utilization.gpu --format=csv >> $d/versions.txt 2>&1
python3 benchmarks/fidelity_table.py $d/fid benchmarks/fidelity_cases_all.txt > $d/fid/table.md 2>&1
tar czf $OUT/$name.tgz -C /tmp $name
ls -la $OUT; tail -5 $d/harness.log; tail -12 $d/ours.log; grep -c . $d/fid/ours/results.jsonl $d/fidB/ours/results.jsonl; ls $d/fid | grep -c 'peer.*csv$'
