#!/usr/bin/env bash
# Issue 21, ninth session: as the eighth session's call, on a 2-GPU host: ours finishes CASES on GPU 1
# (cores 16-31, resuming from .ref/prev) then runs .ref/again.txt (here cases_again_distilbert.txt) again (o1); meanwhile the harness runs .ref/again.txt
# twice (r1, r2) on GPU 0 (cores 0-15). Stops after SECONDS; tars to $OUT.
# usage: .ref/call8.sh NAME CASES SECONDS
name=$1; cases=$2; seconds=$3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export PYTHONUNBUFFERED=1
d=/tmp/$name; mkdir -p $d/fid/ours
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv; nproc; python3 -c "import torch,timm,transformers;print(torch.__version__,timm.__version__,transformers.__version__)"; } > $d/versions.txt 2>&1
cp .ref/prev/fid/peer-* $d/fid/ 2>/dev/null
cp .ref/prev/fid/ours/results.jsonl $d/fid/ours/ 2>/dev/null
cp .ref/prev/fid/*.log $d/fid/ 2>/dev/null; cp .ref/prev/calls.txt $d/ 2>/dev/null
start=$(date +%s)
echo "call $name start $(date -u +%T)" >> $d/calls.txt
setsid taskset -c 0-15 bash -c "env TOOLS=harness HARNESS_GPUS=0 bash benchmarks/fidelity.sh .ref/dynamobench $d/r1 .ref/again.txt > $d/r1.log 2>&1; env TOOLS=harness HARNESS_GPUS=0 bash benchmarks/fidelity.sh .ref/dynamobench $d/r2 .ref/again.txt > $d/r2.log 2>&1" &
hp=$!
setsid taskset -c 16-31 bash -c "env TOOLS=ours OUR_GPUS=1 bash benchmarks/fidelity.sh .ref/dynamobench $d/fid $cases > $d/ours.log 2>&1; echo ours-fid-done \$(date -u +%T) >> $d/calls.txt; env TOOLS=ours OUR_GPUS=1 bash benchmarks/fidelity.sh .ref/dynamobench $d/o1 .ref/again.txt > $d/o1.log 2>&1" &
op=$!
while [ $(( $(date +%s) - start )) -lt $seconds ] && { kill -0 $hp 2>/dev/null || kill -0 $op 2>/dev/null; }; do sleep 5; done
kill -TERM -- -$hp -$op 2>/dev/null; sleep 3; kill -KILL -- -$hp -$op 2>/dev/null
echo "stopped at $(( $(date +%s) - start )) s" >> $d/calls.txt
echo "call $name end $(date -u +%T)" >> $d/calls.txt
nvidia-smi --query-gpu=index,clocks.sm,temperature.gpu,utilization.gpu --format=csv >> $d/versions.txt 2>&1
python3 benchmarks/fidelity_table.py $d/fid benchmarks/fidelity_cases_all.txt > $d/fid/table.md 2>&1
tar czf $OUT/$name.tgz -C /tmp $name
cat $d/calls.txt; grep train $d/fid/table.md | grep -v "| - | - | - | - | - | - | - |"; wc -l $d/fid/ours/results.jsonl $d/o1/ours/results.jsonl; ls $d/r1 $d/r2 | grep -c 'peer.*[a-z].csv$'
