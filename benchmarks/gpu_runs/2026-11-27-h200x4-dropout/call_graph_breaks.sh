#!/usr/bin/env bash
# Issue 21, eighth session: where do the harness's extra graphs in PLBart/XGLM training come
# from? Each tool once per model with TORCH_LOGS=graph_breaks,recompiles on a GPU of its own.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
export PYTHONUNBUFFERED=1 TORCH_LOGS=graph_breaks,recompiles,guards
d=/tmp/$1; mkdir -p $d; root=$PWD
gpu=0
for m in PLBartForCausalLM:16 XGLMForCausalLM:32; do
  name=${m%%:*}; bs=${m##*:}
  (cd .ref/dynamobench && CUDA_VISIBLE_DEVICES=$gpu timeout 280 python3 huggingface.py --performance --training --amp --backend inductor --device cuda --only $name --batch-size $bs --disable-cudagraphs --repeat 5 --output $d/peer-$name.csv > $d/peer-$name.log 2>&1) &
  CUDA_VISIBLE_DEVICES=$((gpu+1)) timeout 280 python3 experiment_runner.py --suite-name=huggingface --filter="^$name\$" --accelerator=cuda --xla=None --dynamo=inductor --test=train --precision=amp --repeat=5 --warmup=3 --processes=1 --print-subprocess --dump-dynamo-counters --no-progress --output-dirname=$d/ours-$name > $d/ours-$name.log 2>&1 &
  gpu=$((gpu+2))
done
wait
tar czf $OUT/$1.tgz -C /tmp $1; for f in $d/*.log; do echo "== $f"; grep -c "Graph break" $f; done; cat $d/peer-*.csv
