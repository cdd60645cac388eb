#!/usr/bin/env bash
# Run PyTorch's own dynamo harness and ours on the same models, precision, batch size and
# inductor mode, one after the other on one GPU, and print the two side by side.
#
#   benchmarks/fidelity.sh HARNESS_DIR OUT_DIR [CASES_FILE]
#
# HARNESS_DIR: a copy of PyTorch's benchmarks/dynamo harness (shared/reference/dynamobench).
# CASES_FILE: lines of "suite model batch_size precision mode" (suite: huggingface|timm;
# precision: bf16|amp; mode: default|cudagraphs); default: benchmarks/fidelity_cases.txt.
# Both run 30 timed repeats of inference, eager and compiled interleaved in one process.
set -uo pipefail
harness=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
cases=${3:-$root/benchmarks/fidelity_cases.txt}
python=${PYTHON:-python3}

grep -v '^\s*#' "$cases" | while read -r suite model batch precision mode; do
  [ -n "${suite:-}" ] || continue
  peer_model=$model
  case "$suite" in
    huggingface) script=huggingface.py ;;
    timm) script=timm_models.py
      # The harness names some timm models with their pretrained tag (name.tag).
      peer_model=$(awk -v m="$model" '$1 == m || index($1, m ".") == 1 {print $1; exit}' \
        "$harness/timm_models_list.txt")
      peer_model=${peer_model:-$model} ;;
    *) echo "unknown suite $suite" >&2; continue ;;
  esac
  case "$precision" in
    bf16) peer_precision=--bfloat16 ;;
    amp) peer_precision=--amp ;;
    *) echo "unknown precision $precision" >&2; continue ;;
  esac
  peer_mode=()
  [ "$mode" = "cudagraphs" ] || peer_mode=(--disable-cudagraphs)
  echo "== $suite $model bs=$batch $precision $mode" >&2
  peer_csv="$out/peer-$suite-$model-$precision-$mode.csv"
  [ -s "$peer_csv" ] || (cd "$harness" && "$python" "$script" --performance --inference "$peer_precision" \
      --backend inductor --device cuda --only "$peer_model" --batch-size "$batch" \
      --cold-start-latency "${peer_mode[@]}" --repeat 30 \
      --output "$peer_csv" >"$out/peer-$model-$mode.log" 2>&1) \
    || echo "harness failed on $model ($mode): see peer-$model-$mode.log" >&2
  (cd "$root" && "$python" experiment_runner.py --suite-name="$suite" --filter="^$model\$" \
      --accelerator=cuda --xla=None --dynamo=inductor --mode="$mode" --test=eval \
      --precision="$precision" --batch-size="$batch" --repeat=30 --warmup=3 --no-progress \
      --output-dirname="$out/ours" >"$out/ours-$model-$mode.log" 2>&1) \
    || echo "ours failed on $model ($mode): see ours-$model-$mode.log" >&2
done
"$python" "$root/benchmarks/fidelity_table.py" "$out" "$cases"
