#!/usr/bin/env bash
# Issue 21, eighth session: the GPU work of one compiled training iteration, each tool, profiled.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
export PYTHONUNBUFFERED=1
d=/tmp/$1; mkdir -p $d; gpu=0
for m in PLBartForCausalLM:16 XGLMForCausalLM:32; do
  name=${m%%:*}; bs=${m##*:}
  (cd .ref/dynamobench && CUDA_VISIBLE_DEVICES=$gpu timeout 250 python3 huggingface.py --performance --training --amp --backend inductor --device cuda --only $name --batch-size $bs --disable-cudagraphs --repeat 10 --export-profiler-trace --profiler_trace_name $d/peer_trace --output $d/peer-$name.csv > $d/peer-$name.log 2>&1) &
  CUDA_VISIBLE_DEVICES=$((gpu+1)) timeout 250 python3 experiment_runner.py --suite-name=huggingface --filter="^$name\$" --accelerator=cuda --xla=None --dynamo=inductor --test=train --precision=amp --repeat=10 --warmup=3 --processes=1 --dump-pytorch-profiles --no-progress --output-dirname=$d/ours-$name > $d/ours-$name.log 2>&1 &
  gpu=$((gpu+2))
done
wait
for f in $d/peer_trace*.json; do python3 .ref/kernels.py $f actual; python3 .ref/kernels.py $f expected | head -3; done > $d/kernels.txt 2>&1
for f in $(find $d/ours-* -name "*.json" | grep -v result); do python3 .ref/kernels.py $f; done >> $d/kernels.txt 2>&1
find $d -name "*.json" -size +1M | xargs gzip
tar czf $OUT/$1.tgz -C /tmp $1; head -c 6000 $d/kernels.txt; grep -h "cuda,"  $d/peer-*.csv
