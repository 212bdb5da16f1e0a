#!/usr/bin/env bash
# One worker of the example crew, for the task $CREW_TASK in run $CREW_RUN.
# It follows the protocol every crew worker follows:
#
#   crew task start                     take the task
#   crew ask "..." --wait               ask the leader, block for the answer
#   ... the work ...                    (here a shell one-liner; in a real
#                                       crew an agent: claude -p, codex exec,
#                                       told to use crew ask and crew report)
#   crew report "..."                   tell the leader what came of it
#   crew task complete                  runs the task's done-when check
#
# Any failure fails the task with the reason, so the run ends either way.
# CREW_EXAMPLE_FAIL=TASK makes that task skip its work, to show what a
# failed crew looks like (its done-when check refuses to complete it).
set -euo pipefail
: "${CREW_RUN:?}" "${CREW_TASK:?}"
trap 'crew task fail --reason "worker.sh failed (line $LINENO, exit $?); see crew task logs $CREW_TASK"' ERR

crew task start
answer=$(crew ask "How should I do $CREW_TASK?" --wait --timeout 5m)
echo "the leader says: $answer"

mkdir -p out
if [ "${CREW_EXAMPLE_FAIL:-}" != "$CREW_TASK" ]; then
  case "$CREW_TASK" in
  inventory)
    find . -path ./.git -prune -o -path ./.crew -prune -o -type f -print |
      sed -n 's|.*/||; s|^[^.]*$|(none)|; s|.*\.||; p' | sort | uniq -c | sort -rn > out/inventory.txt
    summary="$(wc -l < out/inventory.txt | tr -d ' ') kinds of files"
    ;;
  todos)
    { echo "# todos"; grep -rnI -E 'TODO|FIXME' --exclude-dir=.git --exclude-dir=.crew --exclude-dir=out . || true; } > out/todos.txt
    summary="$(($(wc -l < out/todos.txt) - 1)) TODO/FIXME comments"
    ;;
  esac
else
  summary="skipped the work (CREW_EXAMPLE_FAIL)"
fi

crew report "$summary; see out/$CREW_TASK.txt"
crew task complete
