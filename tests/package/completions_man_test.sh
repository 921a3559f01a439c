#!/usr/bin/env bash
# Completions and man pages against the binary: the bash completion offers the commands and
# options `ckpt --help` lists (zsh and fish scripts are syntax-checked when those shells are
# installed); every command of `ckpt --help` and every option of `ckpt verify --help` is in
# ckpt(1), and groff renders both pages without a warning.   completions_man_test.sh CKPT SOURCE_DIR
set -euo pipefail
ckpt=$(realpath "$1") src=$(realpath "$2")
fail() { echo "FAIL: $*" >&2; exit 1; }
export PATH=$(dirname "$ckpt"):$PATH

commands=$("$ckpt" --help | awk '/^commands:/{on=1; next} on && /^  [a-z]/{print $1}')
[ "$(wc -l <<< "$commands")" -ge 10 ] || fail "too few commands in --help: $commands"
complete_words() {  # complete_words WORD... : the bash completion's candidates for the last word
  bash -c 'source "$0"; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _ckpt; printf "%s\n" "${COMPREPLY[@]}"' \
    "$src/completions/ckpt.bash" "$@"
}
for c in $commands; do
  complete_words ckpt "${c:0:3}" | grep -qx "$c" || fail "bash completion does not offer '$c'"
done
for o in --deep --format --engine --cache-dir --strict; do
  complete_words ckpt verify "${o:0:4}" | grep -qx -- "$o" || fail "bash completion does not offer verify $o"
done
complete_words ckpt verify --format j | grep -qx jsonl || fail "no --format values"
complete_words ckpt explain HS00 | grep -qx HS001 || fail "no explain codes"
complete_words ckpt template "" | grep -qx render || fail "no template subcommands"
complete_words ckpt fetch --local | grep -qx -- --local-dir || fail "no fetch options"
if command -v zsh >/dev/null; then zsh -n "$src/completions/_ckpt" || fail "zsh syntax"; else echo "note: zsh not installed, _ckpt not checked"; fi
if command -v fish >/dev/null; then
  fish -n "$src/completions/ckpt.fish" || fail "fish syntax"
  fish_complete() { local out; out=$(fish -c "source '$src/completions/ckpt.fish'; complete -C '$1'"); printf "%s\n" "$out"; }
  fish_complete "ckpt ve" | grep -qx verify || fail "fish completion does not offer verify"
  fish_complete "ckpt verify --de" | grep -q -- "^--deep" || fail "fish completion does not offer --deep"
  fish_complete "ckpt explain QZ00" | grep -q "^QZ004" || fail "fish completion does not offer codes"
else
  echo "note: fish not installed, ckpt.fish not checked"
fi

man=$src/docs/man/ckpt.1
for c in $commands; do
  grep -q "^\.SS \"$c\b" "$man" || fail "ckpt(1) has no section for '$c'"
done
for o in $("$ckpt" verify --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
  [ "$o" = --help ] && continue
  grep -q -- "${o//-/\\\\-}" "$man" || fail "ckpt(1) does not document verify $o"
done
for page in "$man" "$src/docs/man/ckpt-fetch.1"; do
  warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
  [ -z "$warnings" ] || fail "groff warnings in $(basename "$page"): $warnings"
done
echo "completions: $(wc -l <<< "$commands") commands offered; ckpt(1) documents all of them and every verify option"
