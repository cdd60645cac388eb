#!/usr/bin/env bash
# Issue 21, ninth session (2-GPU host): T5ForConditionalGeneration training (.ref/again.txt: cases_again_t5.txt), each tool profiled
# over one compiled iteration (harness GPU 0 cores 0-15, ours GPU 1 cores 16-31), then both
# run .ref/again.txt again side by side (r3, o3). Tars to $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
export PYTHONUNBUFFERED=1
d=/tmp/$1; mkdir -p $d; name=T5ForConditionalGeneration; bs=8
python3 -c "import transformers,torch; from transformers import T5Config, T5ForConditionalGeneration as M; m=M(T5Config()); print('attn', m.config._attn_implementation, transformers.__version__, torch.__version__)" > $d/attn.txt 2>&1
(cd .ref/dynamobench && CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 timeout 250 python3 huggingface.py --performance --training --amp --backend inductor --device cuda --only $name --batch-size $bs --disable-cudagraphs --repeat 10 --export-profiler-trace --profiler_trace_name $d/peer_trace --output $d/peer-$name.csv > $d/peer-$name.log 2>&1; cd ../..; taskset -c 0-15 env TOOLS=harness HARNESS_GPUS=0 bash benchmarks/fidelity.sh .ref/dynamobench $d/r3 .ref/again.txt > $d/r3.log 2>&1) &
(CUDA_VISIBLE_DEVICES=1 taskset -c 16-31 timeout 250 python3 experiment_runner.py --suite-name=huggingface --filter="^$name\$" --accelerator=cuda --xla=None --dynamo=inductor --test=train --precision=amp --repeat=10 --warmup=3 --processes=1 --dump-pytorch-profiles --no-progress --output-dirname=$d/ours-$name > $d/ours-$name.log 2>&1; taskset -c 16-31 env TOOLS=ours OUR_GPUS=1 bash benchmarks/fidelity.sh .ref/dynamobench $d/o3 .ref/again.txt > $d/o3.log 2>&1) &
wait
for f in $d/peer_trace*.json; do python3 .ref/kernels.py $f actual; python3 .ref/kernels.py $f expected; done > $d/kernels.txt 2>&1
for f in $(find $d/ours-* -name "*.json" | grep -v result); do python3 .ref/kernels.py $f; done >> $d/kernels.txt 2>&1
find $d -name "*.json" -size +1M | xargs gzip
tar czf $OUT/$1.tgz -C /tmp $1; cat $d/attn.txt; grep -h "cuda," $d/peer-*.csv $d/r3/peer-*.csv; grep -h "T5" $d/o3/table.md; grep -E "busy|window" $d/kernels.txt | head -30
