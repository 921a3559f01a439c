#!/usr/bin/env bash
# Completions and man pages against the binary. Each shell's completion is driven through that
# shell's own machinery, from the file names and places `cmake --install` gives them: bash
# through bash-completion's on-demand loader, zsh through compinit in a pseudo-terminal
# (zsh_complete.zsh), fish through its vendor_completions.d autoloading; each must offer the
# commands `ckpt --help` lists and the options of `ckpt verify --help`. Every command of
# `ckpt --help` and every option of `ckpt verify --help` is in ckpt(1), and groff renders both
# pages without a warning. Exit 77 (skipped) when a shell is missing, after checking the rest.
#   completions_man_test.sh CKPT SOURCE_DIR
set -euo pipefail
ckpt=$(realpath "$1") src=$(realpath "$2")
fail() { echo "FAIL: $*" >&2; exit 1; }
export PATH=$(dirname "$ckpt"):$PATH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The installed layout (cmake/install.cmake): the names the shells look completions up by.
share=$tmp/share
mkdir -p "$share/bash-completion/completions" "$share/zsh/vendor-completions" "$share/fish/vendor_completions.d"
cp "$src/completions/ckpt.bash" "$share/bash-completion/completions/ckpt"
cp "$src/completions/_ckpt" "$share/zsh/vendor-completions/_ckpt"
cp "$src/completions/ckpt.fish" "$share/fish/vendor_completions.d/ckpt.fish"
unchecked=()
# has PATTERN...: grep that reads all its input (grep -q stops early, and the completer writing
# the rest would die of SIGPIPE, which pipefail reports as a failure).
has() { grep "$@" >/dev/null; }

commands=$("$ckpt" --help | awk '/^commands:/{on=1; next} on && /^  [a-z]/{print $1}')
[ "$(wc -l <<< "$commands")" -ge 10 ] || fail "too few commands in --help: $commands"
# The completions list the engine names themselves: they must be the binary's profiles.
engines=$("$ckpt" engines --format json | python3 -c 'import json,sys; print("\n".join(e["name"] for e in json.load(sys.stdin)["engines"]))')
[ "$(wc -l <<< "$engines")" -ge 5 ] || fail "too few engines: $engines"
offers_engines() {  # offers_engines SHELL CANDIDATES
  for e in $engines; do grep -qxF -- "$e" <<< "$2" || fail "$1: 'ckpt verify --engine <TAB>' does not offer $e (offers: $(tr '\n' ' ' <<< "$2"))"; done
}
complete_words() {  # complete_words WORD... : the bash completion's candidates for the last word
  bash -c 'source "$0"; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _ckpt; printf "%s\n" "${COMPREPLY[@]}"' \
    "$src/completions/ckpt.bash" "$@"
}
for c in $commands; do
  complete_words ckpt "${c:0:3}" | has -x "$c" || fail "bash completion does not offer '$c'"
done
for o in --deep --format --engine --cache-dir --strict; do
  complete_words ckpt verify "${o:0:4}" | has -x -- "$o" || fail "bash completion does not offer verify $o"
done
complete_words ckpt verify --format j | has -x jsonl || fail "no --format values"
complete_words ckpt explain HS00 | has -x HS001 || fail "no explain codes"
complete_words ckpt template "" | has -x render || fail "no template subcommands"
complete_words ckpt fetch --local | has -x -- --local-dir || fail "no fetch options"

# bash as an interactive user has it: bash-completion finds share/bash-completion/completions/ckpt
# on the first TAB for `ckpt` (__load_completion), then calls the function it registered.
bash_completion=/usr/share/bash-completion/bash_completion
if [ -r "$bash_completion" ]; then
  loader_complete() {
    env -i PATH="$PATH" HOME="$tmp" BASH_COMPLETION_USER_DIR="$share/bash-completion" bash --norc --noprofile -c '
      source "$0" || exit 3
      line=$1
      read -ra COMP_WORDS <<< "$line"; [[ $line == *" " ]] && COMP_WORDS+=("")
      COMP_LINE=$line COMP_POINT=${#line} COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
      __load_completion ckpt || { echo "bash-completion did not load a completion for ckpt" >&2; exit 4; }
      spec=$(complete -p ckpt) && fn=${spec##*-F } && fn=${fn%% *} || exit 5
      "$fn" ckpt "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
      printf "%s\n" "${COMPREPLY[@]}"' "$bash_completion" "$1"
  }
  loader_complete "ckpt ver" | has -x verify || fail "bash-completion: 'ckpt ver<TAB>' does not offer verify"
  loader_complete "ckpt verify --for" | has -x -- --format || fail "bash-completion: 'ckpt verify --for<TAB>' does not offer --format"
  loader_complete "ckpt explain QZ00" | has -x QZ004 || fail "bash-completion: no explain codes"
  offers_engines bash-completion "$(loader_complete "ckpt verify --engine ")"
else
  unchecked+=("bash-completion (bash's loader)")
fi

if command -v zsh >/dev/null; then
  zsh -n "$share/zsh/vendor-completions/_ckpt" || fail "zsh syntax"
  zsh_complete() { timeout 30 zsh -f "$src/tests/package/zsh_complete.zsh" "$share/zsh/vendor-completions" "$1"; }
  out=$(zsh_complete "ckpt ver") || fail "zsh completion driver failed (exit $?)"
  grep -qx verify <<< "$out" || fail "zsh: 'ckpt ver<TAB>' offers [$out], not verify"
  out=$(zsh_complete "ckpt verify --for")
  grep -qx -- --format <<< "$out" || fail "zsh: 'ckpt verify --for<TAB>' offers [$out], not --format"
  out=$(zsh_complete "ckpt ")
  for c in $commands; do grep -qx "$c" <<< "$out" || fail "zsh: 'ckpt <TAB>' offers [$out], not $c"; done
  zsh_complete "ckpt verify --format j" | has -x jsonl || fail "zsh: no --format values"
  zsh_complete "ckpt explain QZ00" | has -x QZ004 || fail "zsh: no explain codes"
  offers_engines zsh "$(zsh_complete "ckpt verify --engine ")"
  zsh_complete "ckpt template " | has -x render || fail "zsh: no template subcommands"
else
  unchecked+=(zsh)
fi

if command -v fish >/dev/null; then
  fish -n "$share/fish/vendor_completions.d/ckpt.fish" || fail "fish syntax"
  # fish autoloads vendor_completions.d of every XDG_DATA_DIRS entry on the first completion.
  fish_complete() {
    env -i PATH="$PATH" HOME="$tmp" XDG_CONFIG_HOME="$tmp/config" XDG_DATA_HOME="$tmp/data" XDG_DATA_DIRS="$share" \
      fish -c "complete -C '$1'"
  }
  fish_complete "ckpt ver" | has -x verify || fail "fish: 'ckpt ver<TAB>' does not offer verify"
  fish_complete "ckpt verify --for" | has -- "^--format" || fail "fish: 'ckpt verify --for<TAB>' does not offer --format"
  fish_complete "ckpt verify --de" | has -- "^--deep" || fail "fish completion does not offer --deep"
  fish_complete "ckpt explain QZ00" | has "^QZ004" || fail "fish completion does not offer codes"
  fish_complete "ckpt verify --format j" | has -x jsonl || fail "fish: no --format values"
  offers_engines fish "$(fish_complete "ckpt verify --engine " | cut -f1)"
else
  unchecked+=(fish)
fi

man=$src/docs/man/ckpt.1
for c in $commands; do
  grep -q "^\.SS \"$c\b" "$man" || fail "ckpt(1) has no section for '$c'"
done
for o in $("$ckpt" verify --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
  [ "$o" = --help ] && continue
  grep -q -- "${o//-/\\\\-}" "$man" || fail "ckpt(1) does not document verify $o"
done
for page in "$man" "$src/docs/man/ckpt-fetch.1" "$src/docs/man/ckpt-smoke.1"; do
  warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
  [ -z "$warnings" ] || fail "groff warnings in $(basename "$page"): $warnings"
done
echo "completions: $(wc -l <<< "$commands") commands offered; ckpt(1) documents all of them and every verify option"
if ((${#unchecked[@]})); then
  echo "SKIP: not installed, so not driven: ${unchecked[*]} (scripts/setup.sh installs them)"
  exit 77
fi
