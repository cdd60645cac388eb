#!/usr/bin/env bash
# Issue 21, eleventh session: convnextv2_nano eval with the two tools' places swapped. Every
# earlier call ran the harness on the lower-numbered GPUs and cores; here ours runs on GPU 0
# (cores of the first quarter) and the harness on GPU 1 (second quarter) (folder swap), while
# the usual order runs at the same time: the harness on GPU 2, ours on GPU 3 (folder usual).
# fidelity.sh at its defaults (ours 3 processes, shared caches). Tars to $OUT/NAME.tgz.
# usage: bash .ref/call13.sh NAME
name=$1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
d=/tmp/$name; mkdir -p $d
c=$(nproc); q=$(( c / 4 ))
printf 'timm convnextv2_nano 128 amp default eval\n' > $d/cases.txt
echo "start $(date -u +%T)" >> $d/calls.txt
run() { # run FOLDER TOOL GPU CORES
  if [ "$2" = harness ]; then gpus="HARNESS_GPUS=$3"; else gpus="OUR_GPUS=$3"; fi
  taskset -c $4 env TOOLS=$2 $gpus timeout 200 bash benchmarks/fidelity.sh .ref/dynamobench $d/$1 $d/cases.txt > $d/$1-$2.log 2>&1
  echo "$1 $2 done $(date -u +%T)" >> $d/calls.txt; }
run swap ours 0 0-$((q-1)) &
run swap harness 1 $q-$((2*q-1)) &
run usual harness 2 $((2*q))-$((3*q-1)) &
run usual ours 3 $((3*q))-$((c-1)) &
wait
tar czf $OUT/$name.tgz -C /tmp $name
cat $d/calls.txt
for f in swap usual; do python3 benchmarks/fidelity_table.py $d/$f $d/cases.txt 2>&1 | grep convnextv2 | head -1; done
