#compdef crew
# zsh completion for crew: crew completion zsh > "${fpath[1]}/_crew", or
# source <(crew completion zsh) in ~/.zshrc (after compinit).
#
# Adapted from urfave/cli v2.27.7, autocomplete/zsh_autocomplete: at each
# TAB it runs the words typed so far with --generate-bash-completion
# appended, and crew prints the commands (or, for a word that starts with
# a dash, the flags) that may follow; with none, it completes file names.

_crew_complete() {
  local -a opts
  local cur
  cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion 2>/dev/null)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion 2>/dev/null)}")
  fi
  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}

compdef _crew_complete crew
