#!/usr/bin/env bash
# Builds the libFuzzer targets (clang++, ASan + UBSan) in build-fuzz/ and runs each one for
# SECONDS (default 60), then prints executions and findings per target.
#   scripts/fuzz.sh [SECONDS]
#   FUZZ_TARGETS="fuzz_json fuzz_hub" scripts/fuzz.sh 30   # a subset
# A target's corpus grows in build-fuzz/corpus/<target>/ (kept between runs), seeded from
# fuzz/corpus/<target>/ and, when present, ../shared/corpus. Each target runs in libFuzzer's
# fork mode, so it keeps going past a finding for its whole time. Crashes, leaks, timeouts
# (-timeout=10: a hang is a finding) and out-of-memory inputs (-rss_limit_mb=2048) land in
# build-fuzz/artifacts/<target>/; reproduce one with build-fuzz/fuzz/<target> FILE.
# Exit status: 0 when no target found anything, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET="${1:-60}"
BUILD_DIR="${BUILD_DIR:-build-fuzz}"
SHARED="$(cd .. && pwd)/shared/corpus"
ALL_TARGETS=(fuzz_st_header fuzz_gguf fuzz_json fuzz_index fuzz_jinja fuzz_tokenizer fuzz_spm fuzz_hub fuzz_pickle fuzz_zip fuzz_dequant)
read -r -a TARGETS <<< "${FUZZ_TARGETS:-${ALL_TARGETS[*]}}"

# clang 16 + libFuzzer's runtime (Debian 12: clang-16, libclang-rt-16-dev). Not the default
# clang 14: it cannot capture structured bindings in lambdas (C++20), which the sources use.
FUZZ_CXX="${FUZZ_CXX:-clang++-16}"
missing=()
for p in clang-16 libclang-rt-16-dev cmake ninja-build libsimdjson-dev libfmt-dev libcurl4-openssl-dev libssl-dev zlib1g-dev liblzma-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "fuzz: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# A build dir configured with another compiler is configured afresh.
cxx_path="$(command -v "$FUZZ_CXX")"
if [ -f "$BUILD_DIR/CMakeCache.txt" ] && ! grep -q "^CMAKE_CXX_COMPILER:[A-Z]*=$cxx_path\$" "$BUILD_DIR/CMakeCache.txt"; then
  rm -rf "$BUILD_DIR/CMakeCache.txt" "$BUILD_DIR/CMakeFiles"
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_CXX_COMPILER="$cxx_path" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCKPT_BUILD_FUZZ=ON -DCKPT_BUILD_TESTS=OFF -DCKPT_BUILD_BENCH=OFF >/dev/null
ninja -C "$BUILD_DIR" -j2 "${TARGETS[@]}"

# Per target: -max_len, and read-only seed folders from the shared corpus (when present).
max_len() {
  case "$1" in
    fuzz_jinja) echo 12000 ;;
    fuzz_tokenizer) echo 16384 ;;
    fuzz_hub) echo 1024 ;;
    fuzz_dequant) echo 65536 ;;  # seeds are whole tiny fixtures (config + weights)
    *) echo 4096 ;;
  esac
}
shared_seeds() {
  case "$1" in
    fuzz_st_header) echo "$SHARED/safetensors-vectors" ;;
    fuzz_gguf) echo "$SHARED/gguf" ;;
    fuzz_json) echo "$SHARED/seed-fixtures" ;;
    fuzz_index) echo "$SHARED/index-paths" ;;
    fuzz_jinja) echo "$SHARED/templates $SHARED/templates-bad" ;;
    fuzz_pickle|fuzz_zip) echo "$SHARED/pickles/picklescan/tests/data $SHARED/pickles/picklescan/tests/data2 $SHARED/pickles/modelscan/tests/data" ;;
  esac
}

status=0
summary=()
for t in "${TARGETS[@]}"; do
  bin="$BUILD_DIR/fuzz/$t"
  work="$BUILD_DIR/corpus/$t"
  art="$BUILD_DIR/artifacts/$t"
  log="$BUILD_DIR/logs/$t.log"
  mkdir -p "$work" "$art" "$(dirname "$log")"
  seeds=()
  [ -d "fuzz/corpus/$t" ] && seeds+=("fuzz/corpus/$t")
  for d in $(shared_seeds "$t"); do [ -d "$d" ] && seeds+=("$d"); done
  extra=()
  [ -f "fuzz/$t.dict" ] && extra+=("-dict=fuzz/$t.dict")
  # Sanitizer options reach fork mode's jobs only through the environment (-detect_leaks=0
  # on the command line is not passed on); FUZZ_ASAN_OPTIONS adds to ASAN_OPTIONS.
  asan_options="${ASAN_OPTIONS:-}${FUZZ_ASAN_OPTIONS:+:$FUZZ_ASAN_OPTIONS}"
  before=$(find "$art" -type f | wc -l)
  echo "== $t: ${SECONDS_PER_TARGET}s (log $log)"
  rc=0
  ASAN_OPTIONS="$asan_options" "$bin" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -max_total_time="$SECONDS_PER_TARGET" \
    -max_len="$(max_len "$t")" -rss_limit_mb=2048 -timeout=10 -artifact_prefix="$art/" "${extra[@]}" \
    "$work" "${seeds[@]}" >"$log" 2>&1 || rc=$?
  # Fork-mode status lines: "#EXECS: cov: .. oom/timeout/crash: O/T/C time: ..".
  last=$(grep -E '^#[0-9]+: cov:' "$log" | tail -1 || true)
  execs=$(sed -nE 's/^#([0-9]+):.*/\1/p' <<< "$last")
  otc=$(sed -nE 's#.*oom/timeout/crash: ([0-9]+/[0-9]+/[0-9]+).*#\1#p' <<< "$last")
  after=$(find "$art" -type f | wc -l)
  units=$(find "$work" -type f | wc -l)
  if [ "$rc" -ne 0 ] || [ "$after" -gt "$before" ] || { [ -n "$otc" ] && [ "$otc" != "0/0/0" ]; }; then
    status=1
    what=$(grep -m1 -oE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer): [a-zA-Z -]+|runtime error: .*|out-of-memory \(malloc\([0-9]+\)\)' "$log" || echo "exit $rc")
    summary+=("$(printf '%-15s %12s execs  %6s corpus  oom/timeout/crash %s  FINDING: %s; new artifacts: %s' \
      "$t" "${execs:-?}" "$units" "${otc:-?}" "$what" "$((after - before)) in $art")")
  else
    summary+=("$(printf '%-15s %12s execs  %6s corpus  ok' "$t" "${execs:-?}" "$units")")
  fi
done

echo
echo "fuzz summary (${SECONDS_PER_TARGET}s per target):"
printf '  %s\n' "${summary[@]}"
exit "$status"
