#!/usr/bin/env zsh
# The candidates zsh's own completion system offers for LINE<TAB>, one per line:
#   zsh -f zsh_complete.zsh COMPLETION_DIR LINE
# An interactive zsh runs in a pseudo-terminal (zsh/zpty) with COMPLETION_DIR first in $fpath and
# compinit loaded, so the #compdef line, the autoloading and the widget are the real ones; a
# wrapper around the compadd builtin prints every match it is given before adding it.
zmodload zsh/zpty || { print -u2 "zsh/zpty is not available"; exit 77; }
compdir=$1 line=$2
rc=$(mktemp -d)
trap 'rm -rf $rc' EXIT
# The shell's whole set-up is its own startup files (no system ones): nothing is typed before
# the first prompt, which is a marker, so the line editor is there to read what is typed.
print -r -- 'unsetopt GLOBAL_RCS' > $rc/.zshenv
cat > $rc/.zshrc <<EOF
PS1='<<prompt>>' RPROMPT=''
fpath=(${(q)compdir} \$fpath)
autoload -Uz compinit && compinit -u -D
compadd() {
  if (( \${@[(I)-[OAD]*]} )); then builtin compadd "\$@"; return; fi  # a query, not an offer
  local -a hits; builtin compadd -A hits "\$@"; local h
  for h in \$hits; do print -r -- "<<cand>>\$h"; done
  builtin compadd "\$@"
}
EOF
zpty ckptz env TERM=dumb HOME=$rc ZDOTDIR=$rc zsh -i
zpty -r -m ckptz out '*<<prompt>>*'
zpty -w -n ckptz "$line"$'\t'
# Then clear the line and print a marker (split, so the terminal's echo of it never matches).
zpty -w ckptz $'\C-u'"print '<<do''ne>>'"
zpty -r -m ckptz out '*<<done>>*'
zpty -d ckptz
print -r -- "$out" | tr -d '\r' | grep -o '<<cand>>[^[:space:]]*' | sed 's/^<<cand>>//' | sort -u
