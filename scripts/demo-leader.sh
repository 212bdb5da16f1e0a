#!/usr/bin/env bash
# demo-leader.sh: the leader of `make demo`, a real process in the working
# directory of the demo (a copy of testdata/demo with a .crew state root;
# scripts/demo.sh sets it up). It creates run "demo" with three tasks,
# starts three workers (scripts/demo-worker.sh) in the background, and then
# reacts to what they send it, read from `crew outbox --follow`:
#
#   - test asks "fix or skip?": the leader shows `crew pending`, responds
#     "skip", steers notes (add a Known issues section) and sends it a
#     follow-up (how to run the tests);
#   - notes asks about examples: the leader holds the question until the
#     test question is settled, then responds;
#   - then vet is the only worker it has not heard from: it nudges it;
#   - each worker's final report starts with "done:"; after three, the
#     leader ends with `crew run wait`, which exits 0 when every task
#     completed.
#
# Nothing here sleeps to wait for a worker: the leader blocks reading its
# outbox, and each message it gets is the cue for what it does next, so
# the story ends the same way every time.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/demo-lib.sh"
WHO=leader
colors

# Each worker runs in its own process group (job control, set -m), so that
# if the leader fails, it can stop a worker together with the crew command
# the worker is blocked in.
set -m
WORKERS=()
cleanup() {
	local rc=$?
	for pid in "${WORKERS[@]}"; do
		kill -- "-$pid" 2>/dev/null || true
	done
	[ -z "${FOLLOW_PID:-}" ] || unfollow
	[ -z "${LOG_PID:-}" ] || stop_log
	exit "$rc"
}
trap cleanup EXIT

say "creates run demo: three tasks on package textutil"
crew run create --id demo --title "check package textutil" >/dev/null
export CREW_RUN=demo
start_log
crew task add vet --title "go vet ./..." >/dev/null
crew task add test --title "go test ./..." >/dev/null
crew task add notes --title "write NOTES.md about the API" --done-when "test -s NOTES.md" >/dev/null
pace

# Read what workers send (questions, reports) as it arrives.
follow crew outbox --follow --json

for t in vet test notes; do
	CREW_TASK=$t "$here/demo-worker.sh" 3<&- &
	WORKERS+=($!)
done
say "started three workers in the background (CREW_RUN=demo, CREW_TASK=vet|test|notes)"

heard=" "       # tasks that have sent the leader something
test_settled="" # set once test's question is answered
held=""         # notes' question, held until then
done_reports=0

respond_notes() {
	pace
	say "responds to notes: \"Keep it short: no examples.\""
	crew respond notes "Keep it short: no examples." >/dev/null
	held=""
	nudge_quiet
}

# nudge_quiet nudges every task that has not ended and has sent nothing.
nudge_quiet() {
	local t status
	for t in vet test notes; do
		case $heard in *" $t "*) continue ;; esac
		status=$(field status "$(crew task show "$t" --json)")
		case $status in completed | failed | cancelled) continue ;; esac
		pace
		say "$t is $status and has not said a word since it started: nudge"
		crew nudge "$t" >/dev/null
	done
}

while [ "$done_reports" -lt 3 ]; do
	if ! IFS= read -r -t 120 msg <&3; then
		say "no word from any worker for 120 s; giving up"
		exit 1
	fi
	kind=$(field kind "$msg")
	task=$(field task "$msg")
	id=$(field id "$msg")
	text=$(body "$msg")
	heard="$heard$task "
	case $kind in
	question)
		say "$task asks: \"$text\""
		say "crew pending:"
		crew pending | sed 's/^/          /'
		case $task in
		test)
			pace
			say "responds to test: \"Skip it, and say so in your report: Reverse gets its own fix.\""
			crew respond test "Skip it, and say so in your report: Reverse gets its own fix." >/dev/null
			test_settled=1
			pace
			say "steers notes: add a Known issues section about TestReverseUnicode"
			crew steer notes "Add a Known issues section: Reverse breaks multi-byte characters, so TestReverseUnicode fails (skipped for now)." >/dev/null
			say "sends notes a follow-up: \"When NOTES.md is done, add how to run the tests.\""
			crew follow-up notes "When NOTES.md is done, add how to run the tests." >/dev/null
			[ -z "$held" ] || respond_notes
			;;
		notes)
			if [ -n "$test_settled" ]; then
				respond_notes
			else
				held=$id
				say "holds notes' question until the test question is settled"
			fi
			;;
		esac
		;;
	report)
		say "reads the report from $task: \"$text\""
		crew ack "$id"
		case $text in
		"done: failed"*)
			say "$task failed; stopping the demo"
			exit 1
			;;
		done:*) done_reports=$((done_reports + 1)) ;;
		esac
		;;
	esac
done
unfollow
FOLLOW_PID=

say "has three final reports; waits for every task to end: crew run wait"
set +e
crew run wait --timeout 60s 2>&1 | sed 's/^/          /'
rc=${PIPESTATUS[0]}
set -e
for pid in "${WORKERS[@]}"; do
	wait "$pid" || rc=1
done
WORKERS=()
stop_log
LOG_PID=
say "crew run wait exited $rc"
crew task list | sed 's/^/          /'
exit "$rc"
