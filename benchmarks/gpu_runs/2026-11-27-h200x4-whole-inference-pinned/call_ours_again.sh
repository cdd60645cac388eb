#!/usr/bin/env bash
# Ours alone, again, on the missed cases (.ref/again.txt: cases_again.txt here): the Hugging Face
# ones on GPUs 0,1 (cores 0-31) and the timm ones on GPUs 2,3 (cores 32-63) at once; OUR_FLAGS as
# given; stops after SECONDS; tars to $OUT. usage: OUR_FLAGS=... .ref/call6.sh NAME SECONDS
name=$1; seconds=$2
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
export PYTHONUNBUFFERED=1
d=/tmp/$name; mkdir -p $d; start=$(date +%s)
grep huggingface .ref/again.txt > $d/hf.txt; grep timm .ref/again.txt > $d/timm.txt
setsid taskset -c 0-31 env TOOLS=ours OUR_GPUS=0,1 bash benchmarks/fidelity.sh .ref/dynamobench $d/hf $d/hf.txt > $d/hf.log 2>&1 &
a=$!
setsid taskset -c 32-63 env TOOLS=ours OUR_GPUS=2,3 bash benchmarks/fidelity.sh .ref/dynamobench $d/timm $d/timm.txt > $d/timm.log 2>&1 &
b=$!
while [ $(( $(date +%s) - start )) -lt $seconds ] && { kill -0 $a 2>/dev/null || kill -0 $b 2>/dev/null; }; do sleep 3; done
kill -TERM -- -$a -$b 2>/dev/null; sleep 2; kill -KILL -- -$a -$b 2>/dev/null
echo "stopped at $(( $(date +%s) - start )) s" >> $d/hf.log
tar czf $OUT/$name.tgz -C /tmp $name; cat $d/*/ours/results.jsonl 2>/dev/null | wc -l; tail -3 $d/hf.log $d/timm.log
