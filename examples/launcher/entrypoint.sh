#!/usr/bin/env bash
# A container entrypoint that serves a model only when ckpt verifies the very directory served:
#   entrypoint.sh MODEL SERVER [ARGS...]
# MODEL is a directory or org/name[@revision] in the Hugging Face cache. {model_dir} in the
# server's arguments becomes the resolved directory (also exported as CKPT_MODEL_DIR).
#   CKPT_PREPARE    a command run first (e.g. "ckpt fetch org/name@<commit>"); resolution comes after it
#   CKPT_ENGINE     the engine judged for (default vllm; see `ckpt engines`)
#   CKPT_CACHE_DIR  the hub cache (default: HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub)
#   CKPT_STRICT=1   warnings also refuse
# Exit: the server's own status (exec), or ckpt's (1 findings, 2 unreadable or not cached) when it refuses.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: entrypoint.sh MODEL SERVER [ARGS...]" >&2
  exit 2
fi
model=$1
shift
ckpt=${CKPT:-ckpt}
cache_args=()
[ -z "${CKPT_CACHE_DIR:-}" ] || cache_args=(--cache-dir "$CKPT_CACHE_DIR")

# 1. Preparation (downloads, conversions) first: what is verified is what it left behind.
if [ -n "${CKPT_PREPARE:-}" ]; then
  bash -c "$CKPT_PREPARE"
fi

# 2. The directory that will be served: a cache repo is resolved once, to one snapshot.
if [ -d "$model" ]; then
  model_dir=$(cd "$model" && pwd -P)
elif ! model_dir=$("$ckpt" resolve "$model" --offline "${cache_args[@]}"); then
  echo "entrypoint: $model is not in the cache (fetch it first, e.g. CKPT_PREPARE=\"ckpt fetch $model\"); not starting $1" >&2
  exit 2  # as ckpt verify of a target it cannot read
fi

# 3. Verify that directory, for the engine that will load it.
verify=("$ckpt" verify "$model_dir" --engine "${CKPT_ENGINE:-vllm}")
[ "${CKPT_STRICT:-0}" = 1 ] && verify+=(--strict)
set +e
"${verify[@]}"
status=$?
set -e
if [ $status -ne 0 ]; then
  echo "entrypoint: ckpt verify refused $model_dir (exit $status); not starting $1" >&2
  exit $status
fi

# 4. Serve exactly that directory.
export CKPT_MODEL_DIR=$model_dir
args=()
for a in "$@"; do args+=("${a//\{model_dir\}/$model_dir}"); done
exec "${args[@]}"
