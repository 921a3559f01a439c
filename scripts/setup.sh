#!/usr/bin/env bash
# Installs what ckpt needs on Debian 12 (only what is missing), then configures and builds.
#   scripts/setup.sh [BUILD_DIR] [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages ckpt builds and tests with. One per line; keep the reason beside it.
PACKAGES=(
  g++ cmake ninja-build pkg-config   # toolchain
  libsimdjson-dev                    # every JSON read
  libfmt-dev                         # formatting
  libcli11-dev                       # command-line parsing
  libcurl4-openssl-dev               # hub client
  libssl-dev                         # SHA-256 / SHA-1 (libcrypto)
  zlib1g-dev                         # inflate for deflated zip members (.npz, TorchScript code)
  liblzma-dev                        # LZMA/LZMA2 for 7z archives holding pickles
  libgtest-dev libgmock-dev          # unit tests
  libbenchmark-dev                   # micro-benchmarks
  libcpp-httplib-dev                 # loopback mock hub in tests
  python3-jsonschema                 # validates every JSON/SARIF report against its schema (tests/package)
  lintian dpkg-dev fakeroot file     # builds and lints the .deb (tests/package)
  bash-completion zsh fish groff-base  # drive the installed completions in each shell; render the man pages (tests/package)
  python3 python3-numpy              # test oracles (independent safetensors reader, dequantisation)
  python3-jinja2                     # chat-template oracle where the python3 on PATH has no jinja2 (tests/jinja, tests/engines; the verify bench's baseline)
  curl                               # fetch benchmark baseline
  libopenblas-dev                    # matrix products of the smoke forward pass (src/smoke)
  libonig-dev libutf8proc-dev        # tokenizer.json pre-tokenizer regexes and NFC/NFKC normalisers (src/encode)
)

# scripts/test.sh adds the heavier test-only oracles through EXTRA_PACKAGES.
read -r -a extra <<< "${EXTRA_PACKAGES:-}"
missing=()
for p in "${PACKAGES[@]}" "${extra[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

BUILD_DIR="${1:-build}"
shift || true
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
ninja -C "$BUILD_DIR" "${NINJA_TARGETS:-all}"
