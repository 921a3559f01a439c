#!/usr/bin/env bash
# Quick start 2: install what is missing, build everything, and run the whole test suite (CTest).
#   scripts/test.sh            normal build in build/
#   scripts/test.sh --asan     AddressSanitizer + UndefinedBehaviorSanitizer build in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
# python3-torch (Debian, ~8 minutes to install on a fresh machine) is the independent oracle
# that runs one MLP block of every fixture; the demo does not need it.
# python3-sentencepiece (also the reference encoder for tokenizer.model) trains the gemma families' tokenizer.model of the smoke models and
# python3-regex gives the \p{L} classes of the byte-level BPE pre-tokenizer pattern
# (tools/smoke/train_tiny.py); Python's re has no Unicode property classes.
export EXTRA_PACKAGES="${EXTRA_PACKAGES:-python3-torch python3-sentencepiece python3-regex}"
# The npm oracles (tests/oracles/package.json) go into tests/oracles/node_modules:
# @huggingface/gguf, the independent GGUF reader of the fixture oracle test, and
# @huggingface/jinja, the engine of transformers.js that the hf_jinja runtime is compared with, and
# @huggingface/tokenizers, the tokenizer.json encoder of transformers.js (test_encode's oracle).
# Without Node or npm those tests report themselves skipped.
if command -v npm >/dev/null && { [ ! -d tests/oracles/node_modules/@huggingface/gguf ] || [ ! -d tests/oracles/node_modules/@huggingface/jinja ] || [ ! -d tests/oracles/node_modules/@huggingface/tokenizers ]; }; then
  npm install --prefix tests/oracles --no-audit --no-fund --silent || echo "setup: npm install of tests/oracles failed; the npm oracle tests will skip"
fi
if [ "${1:-}" = "--asan" ]; then
  scripts/setup.sh build-asan -DCKPT_SANITIZE=ON -DCKPT_BUILD_BENCH=OFF
  exec ctest --test-dir build-asan --output-on-failure -j2 --timeout 600
fi
scripts/setup.sh build
# Every `ckpt verify --format json|jsonl|sarif` output the tests produce is kept (test_support's
# run_ckpt) and validated afterwards against docs/report.schema.json and the SARIF 2.1.0 schema.
export CKPT_CAPTURE_REPORTS="$PWD/build/captured-reports"
rm -rf "$CKPT_CAPTURE_REPORTS"
status=0
ctest --test-dir build --output-on-failure -j2 --timeout 600 || status=$?
python3 tests/package/validate_reports.py build/ckpt . "$CKPT_CAPTURE_REPORTS" || { rc=$?; [ $rc -eq 77 ] || status=$rc; }  # 77: skipped
exit $status
