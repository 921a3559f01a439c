# bash completion for ckpt. Commands and options are read from `ckpt --help` and
# `ckpt COMMAND --help`, so the completion always matches the installed binary.

_ckpt_commands() {
  "${1:-ckpt}" --help 2>/dev/null | awk '/^commands:/{on=1; next} on && /^  [a-z]/{print $1}'
}

# Options and sub-subcommands (CLI11's "Subcommands:" section) of one command.
_ckpt_words() {
  local help
  help=$("$1" "${@:2}" --help 2>/dev/null) || true
  printf '%s\n' "$help" | grep -o -- '--[a-z][a-z0-9-]*' | sort -u
  printf '%s\n' "$help" | awk '/^Subcommands:/{on=1; next} on && /^  [a-z]/{print $1}'
}

_ckpt() {
  local cur=${COMP_WORDS[COMP_CWORD]} prog=${COMP_WORDS[0]}
  if ((COMP_CWORD == 1)); then
    mapfile -t COMPREPLY < <(compgen -W "$(_ckpt_commands "$prog") --help --version" -- "$cur")
    return
  fi
  local cmd=(${COMP_WORDS[1]})
  if ((COMP_CWORD >= 3)) && [[ ${COMP_WORDS[1]} == template && ${COMP_WORDS[2]} != -* ]]; then
    cmd+=("${COMP_WORDS[2]}")
  fi
  if [[ $cur == -* || (${COMP_WORDS[1]} == template && $COMP_CWORD == 2) ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_ckpt_words "$prog" "${cmd[@]}")" -- "$cur")
    return
  fi
  case ${COMP_WORDS[COMP_CWORD-1]} in
    --format) mapfile -t COMPREPLY < <(compgen -W "text json jsonl github sarif" -- "$cur"); return ;;
    --engine) mapfile -t COMPREPLY < <(compgen -W "transformers vllm sglang tgi mlx-lm swiftlm llama.cpp transformers.js" -- "$cur"); return ;;
  esac
  if [[ ${COMP_WORDS[1]} == explain ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$("$prog" explain --list 2>/dev/null | awk '{print $1}')" -- "$cur")
    return
  fi
  mapfile -t COMPREPLY < <(compgen -f -- "$cur")  # a model directory or file
}
complete -o filenames -F _ckpt ckpt
