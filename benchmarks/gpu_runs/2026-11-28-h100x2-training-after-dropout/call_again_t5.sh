#!/usr/bin/env bash
# Issue 21, ninth session (2-GPU host, warm after call_profiles_t5.sh): both tools run
# .ref/again.txt (cases_again_t5.txt) once more side by side, the harness on GPU 0 (cores
# 0-15) and ours on GPU 1 (cores 16-31). Tars to $OUT. (The call's command line, as it ran.)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1; d=/tmp/p2; mkdir -p $d; (taskset -c 0-15 env TOOLS=harness HARNESS_GPUS=0 bash benchmarks/fidelity.sh .ref/dynamobench $d/r4 .ref/again.txt > $d/r4.log 2>&1) & (taskset -c 16-31 env TOOLS=ours OUR_GPUS=1 bash benchmarks/fidelity.sh .ref/dynamobench $d/o4 .ref/again.txt > $d/o4.log 2>&1) & wait; tar czf $OUT/p2.tgz -C /tmp p2; grep -h "cuda," $d/r4/peer-*train.csv; grep -h T5 $d/o4/table.md
