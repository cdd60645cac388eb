#!/usr/bin/env bash
# Issue 21, eleventh session: on a host of 4 GPUs, two kernel comparisons at once
# (.ref/kernels.sh: convnextv2_nano eval on GPUs 0-1, MobileBertForMaskedLM eval on 2-3), then
# GPT2ForSequenceClassification eval the same way on GPUs 0-1 while fidelity.sh times
# convnextv2_nano eval plainly (the harness twice on GPU 2, ours once on GPU 3, 3 processes).
# Tars everything to $OUT/NAME.tgz.
# usage: bash .ref/call10.sh NAME
name=$1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
d=/tmp/$name; mkdir -p $d
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv; nproc; python3 -c "import torch,timm,transformers;print(torch.__version__,timm.__version__,transformers.__version__)"; } > $d/versions.txt 2>&1
c=$(nproc); q=$(( c / 4 ))
r() { echo "$1 $(date -u +%T)" >> $d/calls.txt; }
r "round 1 start"
PEER_GPU=0 OURS_GPU=1 PEER_CORES=0-$((q-1)) OURS_CORES=$q-$((2*q-1)) SECONDS_EACH=260 \
  bash .ref/kernels.sh k1 timm convnextv2_nano 128 eval amp &
PEER_GPU=2 OURS_GPU=3 PEER_CORES=$((2*q))-$((3*q-1)) OURS_CORES=$((3*q))-$((c-1)) SECONDS_EACH=260 \
  bash .ref/kernels.sh k2 huggingface MobileBertForMaskedLM 256 eval bf16 &
wait
r "round 2 start"
PEER_GPU=0 OURS_GPU=1 PEER_CORES=0-$((q-1)) OURS_CORES=$q-$((2*q-1)) SECONDS_EACH=250 \
  bash .ref/kernels.sh k3 huggingface GPT2ForSequenceClassification 8 eval bf16 &
printf 'timm convnextv2_nano 128 amp default eval\n' > /tmp/cnx.txt
( taskset -c $((2*q))-$((3*q-1)) env TOOLS=harness HARNESS_GPUS=2 timeout 250 bash -c \
    "bash benchmarks/fidelity.sh .ref/dynamobench $d/p1 /tmp/cnx.txt; bash benchmarks/fidelity.sh .ref/dynamobench $d/p2 /tmp/cnx.txt" > $d/plain-harness.log 2>&1 ) &
( taskset -c $((3*q))-$((c-1)) env TOOLS=ours OUR_GPUS=3 timeout 250 \
    bash benchmarks/fidelity.sh .ref/dynamobench $d/p1 /tmp/cnx.txt > $d/plain-ours.log 2>&1 ) &
wait
r "round 2 end"
mv /tmp/k1 /tmp/k2 /tmp/k3 $d/ 2>/dev/null
tar czf $OUT/$name.tgz -C /tmp $name
cat $d/calls.txt
for k in k1 k2 k3; do echo "== $k"; grep -h "cuda," $d/$k/peer-*.csv; tail -2 $d/$k/ours-*.log; grep -E "busy|window" $d/$k/kernels.txt; wc -l < $d/$k/output_code_files.txt; wc -l $d/$k/best_configs_*.txt; done
python3 benchmarks/fidelity_table.py $d/p1 /tmp/cnx.txt 2>&1 | tail -8; ls $d/p2
