#!/usr/bin/env bash
# The GPU comparison we run on a CUDA machine: eager, inductor and torchax (JAX's CUDA PJRT)
# over the builtin, timm and Hugging Face suites, with verification.
#   benchmarks/gpu_sweep.sh STAGE OUTPUT_DIR
# STAGE: builtin, builtin-torchax, timm, timm-torchax, huggingface, huggingface-torchax,
# verify or profile. Each stage appends to OUTPUT_DIR/results.jsonl, so stages can run in
# separate runs and resume.
set -uo pipefail
stage=${1:?stage: builtin, timm, huggingface, verify or profile}
out=${2:?output folder}
run() { python3 experiment_runner.py --accelerator=cuda --no-progress --output-dirname "$out" "$@"; }
TIMM=(-k '^mobilenetv2_100$' -k '^deit_tiny_patch16_224$' -k '^convnextv2_nano$'
      -k '^repvgg_a2$' -k '^tf_efficientnet_b0$' -k '^ghostnet_100$')
HF=(-k '^BertForMaskedLM$' -k '^DistilBertForMaskedLM$' -k '^DistillGPT2$'
    -k '^AlbertForMaskedLM$' -k '^T5Small$' -k '^ElectraForCausalLM$')
case "$stage" in
  builtin)
    run --xla=None --dynamo=None --dynamo=inductor --test=eval --test=train --verify ;;
  builtin-torchax)
    run --torch-xla2=extract_jax --test=eval --test=train --verify ;;
  timm)
    run --suite-name=timm "${TIMM[@]}" --xla=None --dynamo=None --dynamo=inductor --test=eval ;;
  timm-torchax)
    run --suite-name=timm "${TIMM[@]}" --torch-xla2=extract_jax --test=eval ;;
  huggingface)
    run --suite-name=huggingface "${HF[@]}" --xla=None --dynamo=None --dynamo=inductor --test=eval ;;
  huggingface-torchax)
    run --suite-name=huggingface "${HF[@]}" --torch-xla2=extract_jax --test=eval ;;
  verify)
    run --suite-name=timm "${TIMM[@]:0:6}" --xla=None --dynamo=inductor --test=eval --verify-only
    run --suite-name=huggingface "${HF[@]:0:6}" --xla=None --dynamo=inductor --test=eval --verify-only
    run --suite-name=timm -k '^mobilenetv2_100$' --torch-xla2=extract_jax --test=eval --verify-only ;;
  profile)
    run -k '^mlp$' -k '^transformer_block$' --xla=None --dynamo=None --dynamo=inductor --test=eval \
        --test=train --profile-cuda-cpu --dump-pytorch-profiles --repeat=5 ;;
  *) echo "unknown stage $stage" >&2; exit 2 ;;
esac
