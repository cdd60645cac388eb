#!/usr/bin/env bash
# Issue 21, for the next session: why ours' process times inductor's in-place kernels 2 to 2.5x
# slower than the harness's while tuning them. With autotune_probe/ on PYTHONPATH, every
# process logs, per kernel tuned, the bytes of the arguments it writes to and the allowance
# inductor gives itself for copies of them on the card (AUTOTUNE-PROBE lines, stderr). One
# compile of convnextv2_nano eval by each tool (the harness on GPU 0, ours on GPU 1, one
# process), and of MobileBertForMaskedLM eval (GPUs 2 and 3), at once, with the configs kept
# logged (TORCH_LOGS). Tars to $OUT/NAME.tgz.
# usage: bash .ref/call15.sh NAME   (copy this folder's autotune_probe/ to .ref/autotune_probe first)
name=$1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD/.ref/autotune_probe:/tmp/site
export TORCH_LOGS=+torch._inductor.runtime.triton_heuristics PYTHONUNBUFFERED=1
d=/tmp/$name; mkdir -p $d
c=$(nproc); q=$(( c / 4 ))
printf 'timm convnextv2_nano 128 amp default eval\n' > $d/cases_A.txt
printf 'huggingface MobileBertForMaskedLM 256 bf16 default eval\n' > $d/cases_B.txt
run() { # run FOLDER TOOL GPU CORES CASES
  if [ "$2" = harness ]; then gpus="HARNESS_GPUS=$3"; else gpus="OUR_GPUS=$3"; fi
  taskset -c $4 env TOOLS=$2 $gpus OUR_FLAGS=--processes=1 timeout 200 bash benchmarks/fidelity.sh .ref/dynamobench $d/$1 $5 > $d/$1.log 2>&1; }
run hA harness 0 0-$((q-1)) $d/cases_A.txt &
run oA ours 1 $q-$((2*q-1)) $d/cases_A.txt &
run hB harness 2 $((2*q))-$((3*q-1)) $d/cases_B.txt &
run oB ours 3 $((3*q))-$((c-1)) $d/cases_B.txt &
wait
# Second round: the same, with every written argument cloned on the card in ours (none copied
# to the host while tuning); the harness again for its spread.
run hA2 harness 0 0-$((q-1)) $d/cases_A.txt &
AUTOTUNE_PROBE_CLONE_ON_CARD=1 run oA2 ours 1 $q-$((2*q-1)) $d/cases_A.txt &
run hB2 harness 2 $((2*q))-$((3*q-1)) $d/cases_B.txt &
AUTOTUNE_PROBE_CLONE_ON_CARD=1 run oB2 ours 3 $((3*q))-$((c-1)) $d/cases_B.txt &
wait
tar czf $OUT/$name.tgz -C /tmp $name
for f in hA oA hB oB hA2 oA2 hB2 oB2; do echo "== $f"; grep -rh "AUTOTUNE-PROBE " $d/$f | grep -v "mutated=-" | head -12; grep -rh "AUTOTUNE-PROBE-BENCH" $d/$f | grep -v "num_device_alloc=0 " | head -5; done
