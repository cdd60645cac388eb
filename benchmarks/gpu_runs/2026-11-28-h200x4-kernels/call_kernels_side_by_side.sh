#!/usr/bin/env bash
# Issue 21: one case compiled by each tool with inductor's debug output kept
# (TORCH_COMPILE_DEBUG: each graph's output_code.py, the generated kernels) and compiled runs
# profiled, and the config inductor's autotuning chose for each kernel logged (TORCH_LOGS at
# debug for triton_heuristics: "Best config for ..."), the harness on PEER_GPU (cores
# PEER_CORES), ours on OURS_GPU (cores OURS_CORES), at the same time; then .ref/kernels.py sums
# each trace's GPU kernels. Expects the wheels of .whl on PYTHONPATH. Leaves its folder in /tmp.
# usage: PEER_GPU=0 OURS_GPU=1 PEER_CORES=0-15 OURS_CORES=16-31 SECONDS_EACH=280 \
#          bash .ref/kernels.sh NAME SUITE MODEL BATCH TEST PRECISION
# e.g.   bash .ref/kernels.sh k1 timm convnextv2_nano 128 eval amp
name=$1; suite=$2; model=$3; bs=$4; test=$5; precision=$6
pg=${PEER_GPU:-0}; og=${OURS_GPU:-1}; pc=${PEER_CORES:-0-15}; oc=${OURS_CORES:-16-31}
secs=${SECONDS_EACH:-280}
export PYTHONUNBUFFERED=1
d=/tmp/$name; mkdir -p $d
script=huggingface.py; peer_model=$model
if [ "$suite" = timm ]; then
  script=timm_models.py
  peer_model=$(awk -v m="$model" '$1 == m || index($1, m ".") == 1 {print $1; exit}' .ref/dynamobench/timm_models_list.txt)
fi
peer_test=--inference; [ "$test" = train ] && peer_test=--training
peer_precision=--amp; [ "$precision" = bf16 ] && peer_precision=--bfloat16
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $d/gpus.txt 2>&1
(cd .ref/dynamobench && CUDA_VISIBLE_DEVICES=$pg TORCH_LOGS=+torch._inductor.runtime.triton_heuristics TORCH_COMPILE_DEBUG=1 TORCH_COMPILE_DEBUG_DIR=$d/debug-peer \
  taskset -c $pc timeout $secs python3 $script --performance $peer_test $peer_precision \
  --backend inductor --device cuda --only $peer_model --batch-size $bs --disable-cudagraphs \
  --repeat 10 --export-profiler-trace --profiler_trace_name $d/peer_trace \
  --output $d/peer-$model.csv > $d/peer-$model.log 2>&1) &
(CUDA_VISIBLE_DEVICES=$og TORCH_LOGS=+torch._inductor.runtime.triton_heuristics TORCH_COMPILE_DEBUG=1 TORCH_COMPILE_DEBUG_DIR=$d/debug-ours \
  taskset -c $oc timeout $secs python3 experiment_runner.py --suite-name=$suite \
  --filter="^$model\$" --accelerator=cuda --xla=None --dynamo=inductor --test=$test \
  --precision=$precision --batch-size=$bs --repeat=10 --processes=1 --dump-pytorch-profiles \
  --no-progress --output-dirname=$d/ours-$model > $d/ours-$model.log 2>&1) &
wait
{ for f in $d/peer_trace*.json; do python3 .ref/kernels.py $f actual; done
  for f in $(find $d/ours-* -name trace.json | sort | head -2); do python3 .ref/kernels.py $f; done; } > $d/kernels.txt 2>&1
find $d/debug-* -name output_code.py | sort > $d/output_code_files.txt
grep -ho "Best config for .*" $d/peer-$model.log | sort > $d/best_configs_peer.txt
find $d/ours-* -name child.log | xargs -r grep -ho "Best config for .*" | sort > $d/best_configs_ours.txt
find $d -name "*.json" -size +1M | xargs -r gzip
