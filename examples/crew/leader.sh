#!/usr/bin/env bash
# The leader of the example crew (examples/github-actions.yml).
#
#   leader.sh start   create the run $CREW_RUN with its tasks, start one
#                     supervised worker per task (crew spawn) and a
#                     watcher that answers questions
#   leader.sh stop    stop what start left running: the workers through
#                     crew run stop, the watcher by the pid it saved
#
# A worker's output goes to its task's worker log (crew task logs TASK),
# the watcher's log and pid to .crew/logs/; the workflow keeps both with
# the run. Waiting and reporting are the workflow's own steps: crew run
# wait, crew run report.
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

  # crew spawn supervises each worker: it records the worker's start and
  # exit, fails the task if the worker dies before ending it, and stops
  # the worker when the task is cancelled or the run stopped.
  for task in inventory todos; do
    nohup crew spawn "$task" -- "$here/worker.sh" > "$logs/$task.spawn.log" 2>&1 &
  done
  crew task list
}

stop() {
  # Cancels what has not ended and stops every worker still running,
  # waiting for each exit to be recorded ("nothing to stop" when all ended).
  crew run stop --reason "the workflow ended"
  # The watcher is no worker of the run: stop it by its pid, if that pid
  # is still the watcher (a pid may have been reused since).
  if [ -f "$logs/leader.pid" ]; then
    pid=$(cat "$logs/leader.pid")
    if tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q 'crew watch' && kill "$pid"; then
      echo "stopped leader ($pid)"
    fi
    rm -f "$logs/leader.pid"
  fi
}

case "${1:-}" in
start) start ;;
stop) stop ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
