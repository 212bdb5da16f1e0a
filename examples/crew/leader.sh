#!/usr/bin/env bash
# The leader of the example crew (examples/github-actions.yml).
#
#   leader.sh start   create the run $CREW_RUN with its tasks, start one
#                     worker per task and a watcher that answers questions
#   leader.sh stop    stop what start left running (by the pids it saved)
#
# The helpers' logs and pids go to .crew/logs/, which the workflow keeps
# with the run. Waiting and reporting are the workflow's own steps:
# crew run wait, crew run report.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
logs=.crew/logs

start() {
  : "${CREW_RUN:?set CREW_RUN to the run id}"
  crew init
  crew run create --id "$CREW_RUN" --title "example crew: survey the repository"
  # Each task says how to check it is done: task complete runs the check
  # in this directory and refuses unless it exits 0.
  crew task add inventory --agent surveyor --title "count the files by extension" \
    --done-when 'test -s out/inventory.txt'
  crew task add todos --agent surveyor --title "list TODO and FIXME comments" \
    --done-when 'test -f out/todos.txt && grep -q "^# todos" out/todos.txt'
  mkdir -p "$logs" out

  # The leader answers each question as it arrives: crew watch runs
  # answer.sh once per message a worker sends.
  nohup crew watch --agent leader --since 0 --exec "$here/answer.sh" > "$logs/leader.log" 2>&1 &
  echo $! > "$logs/leader.pid"

  for task in inventory todos; do
    CREW_TASK=$task nohup "$here/worker.sh" > "$logs/$task.log" 2>&1 &
    echo $! > "$logs/$task.pid"
  done
  crew task list
}

stop() {
  shopt -s nullglob
  for f in "$logs"/*.pid; do
    pid=$(cat "$f")
    if kill "$pid" 2>/dev/null; then
      echo "stopped $(basename "$f" .pid) ($pid)"
    fi
    rm -f "$f"
  done
}

case "${1:-}" in
start) start ;;
stop) stop ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
