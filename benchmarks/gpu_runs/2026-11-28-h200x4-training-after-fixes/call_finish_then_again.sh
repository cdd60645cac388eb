#!/usr/bin/env bash
# GPU call (issue 21, tenth session): the harness on HGPUS and ours on OGPUS over CASES side by
# side (fid), each on its own share of cores; then each tool over .ref/again.txt: the harness
# twice (r1, r2), ours once (o1). Every folder resumes from .ref/prev (an earlier call's
# archive, unpacked), so a call picks up where the last one stopped. Stops after SECONDS; tars
# to $OUT.
# usage: HGPUS=0,1 OGPUS=2,3 bash .ref/call8.sh NAME CASES SECONDS
name=$1; cases=$2; seconds=$3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export PYTHONUNBUFFERED=1
d=/tmp/$name; mkdir -p $d
for f in fid r1 r2 o1; do [ -d .ref/prev/$f ] && cp -r .ref/prev/$f $d/; mkdir -p $d/$f; done
cp .ref/prev/calls.txt $d/ 2>/dev/null
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv; nproc; lscpu -e=CPU,CORE,SOCKET 2>/dev/null | head -70; python3 -c "import torch,timm,transformers;print(torch.__version__,timm.__version__,transformers.__version__)"; git log -1 --format=%h 2>/dev/null; } > $d/versions-$name.txt 2>&1
hgpus=${HGPUS:-0,1}; ogpus=${OGPUS:-2,3}
n_h=$(echo $hgpus | tr , '\n' | grep -c .); n_all=$(( n_h + $(echo $ogpus | tr , '\n' | grep -c .) ))
cores=$(nproc); hc=$(( cores * n_h / n_all ))
start=$(date +%s)
echo "call $name start $(date -u +%T)" >> $d/calls.txt
h() { TOOLS=harness HARNESS_GPUS=$hgpus bash benchmarks/fidelity.sh .ref/dynamobench $d/$1 $2 >> $d/harness-$1.log 2>&1; echo "harness $1 done $(date -u +%T)" >> $d/calls.txt; }
o() { TOOLS=ours OUR_GPUS=$ogpus bash benchmarks/fidelity.sh .ref/dynamobench $d/$1 $2 >> $d/ours-$1.log 2>&1; echo "ours $1 done $(date -u +%T)" >> $d/calls.txt; }
export -f h o; export d hgpus ogpus
setsid taskset -c 0-$((hc-1)) bash -c "h fid $cases; h r1 .ref/again.txt; h r2 .ref/again.txt" &
hp=$!
setsid taskset -c $hc-$((cores-1)) bash -c "o fid $cases; o o1 .ref/again.txt" &
op=$!
while [ $(( $(date +%s) - start )) -lt $seconds ] && { kill -0 $hp 2>/dev/null || kill -0 $op 2>/dev/null; }; do sleep 5; done
kill -TERM -- -$hp -$op 2>/dev/null; sleep 3; kill -KILL -- -$hp -$op 2>/dev/null
echo "call $name end $(date -u +%T) after $(( $(date +%s) - start )) s" >> $d/calls.txt
nvidia-smi --query-gpu=index,clocks.sm,temperature.gpu,utilization.gpu --format=csv >> $d/versions-$name.txt 2>&1
python3 benchmarks/fidelity_table.py $d/fid $cases > $d/fid/table.md 2>&1
tar czf $OUT/$name.tgz -C /tmp $name
cat $d/calls.txt; tail -12 $d/fid/table.md; grep -c . $d/fid/ours/results.jsonl $d/o1/ours/results.jsonl 2>/dev/null; ls $d/fid $d/r1 $d/r2 | grep -c 'peer.*[a-z].csv$'
