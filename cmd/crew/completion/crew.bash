# bash completion for crew: source <(crew completion bash), e.g. in ~/.bashrc.
#
# Adapted from urfave/cli v2.27.7, autocomplete/bash_autocomplete: at each
# TAB it runs the words typed so far with --generate-bash-completion
# appended, and crew prints the commands (or, for a word that starts with
# a dash, the flags) that may follow. Unlike the original it runs those
# words as they are, never through eval (a word typed on the command line
# is not executed as shell code), and needs no bash-completion package.

_crew_complete() {
  local cur="${COMP_WORDS[COMP_CWORD]}"
  local words=("${COMP_WORDS[@]:0:COMP_CWORD}")
  local opts
  if [[ "$cur" == -* ]]; then
    opts=$("${words[@]}" "$cur" --generate-bash-completion 2>/dev/null)
  else
    opts=$("${words[@]}" --generate-bash-completion 2>/dev/null)
  fi
  COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}

complete -o bashdefault -o default -F _crew_complete crew
