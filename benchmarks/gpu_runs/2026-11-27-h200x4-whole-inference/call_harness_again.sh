#!/usr/bin/env bash
# Harness only, again, on 4 GPUs (its own spread), into a fresh folder; stops after SECONDS.
name=$1; cases=$2; seconds=$3
export PYTHONUNBUFFERED=1
d=/tmp/$name; mkdir -p $d/fid; start=$(date +%s)
setsid env TOOLS=harness HARNESS_GPUS=0,1,2,3 bash benchmarks/fidelity.sh .ref/dynamobench $d/fid $cases > $d/harness.log 2>&1 &
hp=$!
while [ $(( $(date +%s) - start )) -lt $seconds ] && kill -0 $hp 2>/dev/null; do sleep 3; done
kill -TERM -- -$hp 2>/dev/null; sleep 2; kill -KILL -- -$hp 2>/dev/null
date -u > $d/end.txt; tar czf $OUT/$name.tgz -C /tmp $name; ls $d/fid | grep -c 'peer.*[a-z].csv$'
