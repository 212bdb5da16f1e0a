#!/usr/bin/env bash
# demo.sh CREW: what `make demo` runs (CREW is the crew binary it built).
#
# In a fresh temporary directory holding a copy of testdata/demo (a small
# real Go module with one deliberately failing test) and a new .crew state
# root, a leader process (scripts/demo-leader.sh) creates a run with three
# tasks and starts three worker processes (scripts/demo-worker.sh). They
# coordinate through crew alone: ask and respond, steer, follow-up, nudge,
# reports, and `crew run wait` at the end. The transcript shows who said
# what, and the run's event log as it grows ("log #seq" lines). At the end
# it prints where the files are, to open and read with jq.
#
# Needs bash, coreutils, sed and Go; jq is optional. Exits 0 when the run
# ended with every task completed.
set -euo pipefail
crew_bin=${1:?usage: scripts/demo.sh PATH-TO-CREW-BINARY}
[ -x "$crew_bin" ] || { echo "demo: $crew_bin is not an executable file" >&2; exit 2; }
crew_bin="$(cd "$(dirname "$crew_bin")" && pwd)/$(basename "$crew_bin")"
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")

work=$(mktemp -d "${TMPDIR:-/tmp}/crew-demo.XXXXXX")
cp -R "$repo/testdata/demo/." "$work/"
chmod -R u+w "$work"

# `crew` on PATH is the binary under test, whatever its file is called.
mkdir "$work/.bin"
ln -s "$crew_bin" "$work/.bin/crew"
export PATH="$work/.bin:$PATH"

# The user's shell must not leak a run, task or agent into the demo.
unset CREW_RUN CREW_TASK CREW_AGENT CREW_JSON
export CREW_DIR="$work/.crew"
# The demo module stands alone: no go.work, no GOFLAGS from the caller.
export GOWORK=off
unset GOFLAGS

bold= reset=
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then bold=$'\e[1m' reset=$'\e[0m'; fi

trap 'rc=$?; [ "$rc" -eq 0 ] || echo "demo: failed (exit $rc); its files are in $work" >&2' EXIT

cd "$work"
crew init >/dev/null
echo "${bold}crew demo${reset}: a leader and three workers on package textutil (a copy of testdata/demo)"
echo "working directory: $work"
echo

"$here/demo-leader.sh"

run="$CREW_DIR/state/runs/demo"
seq=$(crew run show demo --json | sed -n 's/.*"seq":\([0-9]*\).*/\1/p')
# count FILE KIND: how many messages of KIND a mailbox file holds.
count() { grep -c "\"kind\":\"$2\"" "$run/mailbox/$1" || true; }
echo
echo "${bold}Where it all is${reset} (in $work):"
printf '  %-46s %s\n' \
	".crew/state/runs/demo/events.jsonl" "the source of truth: $seq events, seq 1..$seq" \
	".crew/state/runs/demo/tasks.json" "task states as of the last seq (a projection)" \
	".crew/state/runs/demo/mailbox/outbox.jsonl" "workers -> leader: $(count outbox.jsonl question) questions, $(count outbox.jsonl report) reports" \
	".crew/state/runs/demo/mailbox/inbox.jsonl" "leader -> workers: $(count inbox.jsonl response) responses, $(count inbox.jsonl follow-up) follow-up, $(count inbox.jsonl nudge) nudge" \
	".crew/state/runs/demo/mailbox/steering.jsonl" "leader -> workers: $(count steering.jsonl steer) steer" \
	".crew/state/mail/<agent>/" "every message again, one JSON file each: $(cd "$CREW_DIR/state/mail" && ls | paste -sd ' ' -)" \
	"NOTES.md" "what the notes worker wrote"
echo
echo "${bold}Try${reset}:"
echo "  cd $work"
echo "  jq -c '{seq, type, task, actor, from, to}' .crew/state/runs/demo/events.jsonl"
echo "  jq -r 'select(.kind == \"question\") | .body' .crew/state/runs/demo/mailbox/outbox.jsonl"
echo "  jq -c 'select(.message.replyTo) | {task, question: .message.replyTo, response: .message.id}' .crew/state/runs/demo/events.jsonl"
echo "  $crew_bin events --type task.waiting --type task.responded"
if command -v jq >/dev/null 2>&1; then
	echo
	echo "${bold}For example${reset}, the questions the workers asked:"
	jq -r 'select(.kind == "question") | "  " + .body' "$run/mailbox/outbox.jsonl"
fi
