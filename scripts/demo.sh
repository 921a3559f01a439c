#!/usr/bin/env bash
# Quick start 1: install what is missing, build ckpt, and run its main job on a built-in demo
# (a good checkpoint and a broken one that ckpt writes itself).
set -euo pipefail
cd "$(dirname "$0")/.."
NINJA_TARGETS=ckpt scripts/setup.sh build
exec build/ckpt demo "$@"
