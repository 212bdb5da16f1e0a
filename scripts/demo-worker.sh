#!/usr/bin/env bash
# demo-worker.sh: one worker of `make demo`, a real process that does one
# task of the run with the crew command line, as a worker agent would. Its
# identity comes from the environment its leader set (CREW_RUN, CREW_TASK,
# and CREW_DIR for the state root); its task id says which worker it is:
#
#   vet    runs go vet, then goes quiet: it ends its turn without reporting,
#          as agents sometimes do, and sits waiting for mail. The leader
#          nudges it; it answers with a report and completes.
#   test   runs go test, finds the deliberate failure, asks the leader
#          "fix or skip?" with `crew ask --wait` and blocks until it answers;
#          skips the test as told, reports, completes.
#   notes  writes NOTES.md about the package, asks whether to add examples;
#          on the way it is steered (add a "Known issues" section) and given
#          a follow-up (how to run the tests); does both, reports, completes.
#
# A worker reads its inbox only at safe points, between steps
# (`crew inbox --json`), and acknowledges each message once it has acted on
# it (`crew ack`). It never sleeps to wait for anyone: `crew ask --wait`
# blocks until the answer, and a worker with nothing to do blocks on
# `crew inbox --follow` until mail arrives.
set -euo pipefail
. "$(dirname "$0")/demo-lib.sh"
: "${CREW_RUN:?set by the leader}" "${CREW_TASK:?set by the leader}"
WHO=$CREW_TASK
colors

# STATUS is what this worker says when nudged; a status starting with
# "done:" is its final report, which the leader counts.
STATUS="starting"
QUEUED=" "    # ids of follow-ups queued but not yet done
FOLLOW_UPS=() # their message lines, in arrival order

# If anything fails unexpectedly, tell the leader and fail the task, so
# that nobody waits for this worker forever.
finish() {
	local rc=$?
	if [ "$rc" -ne 0 ]; then
		crew report --priority urgent "done: failed (worker script exit $rc)" >/dev/null 2>&1 || true
		crew task fail --reason "worker script failed (exit $rc)" >/dev/null 2>&1 || true
		say "failed (exit $rc)"
	fi
}
trap finish EXIT

# safe_point reads the inbox and acts on each message: a steer now (it may
# redirect the current work), a follow-up after the current work (queued
# until run_follow_ups), a nudge by reporting the status.
safe_point() {
	local msgs line kind id
	msgs=$(crew inbox --json)
	while IFS= read -r line; do
		[ -n "$line" ] || continue
		kind=$(field kind "$line")
		id=$(field id "$line")
		case $kind in
		steer)
			say "safe point: steered by the leader: \"$(body "$line")\""
			on_steer "$line"
			crew ack "$id"
			;;
		follow-up)
			case $QUEUED in *" $id "*) continue ;; esac
			say "safe point: follow-up queued for after this step: \"$(body "$line")\""
			QUEUED="$QUEUED$id "
			FOLLOW_UPS+=("$line")
			;;
		nudge)
			say "safe point: nudged: \"$(body "$line")\""
			say "reports: \"$STATUS\""
			crew report "$STATUS" >/dev/null
			NUDGED=1
			crew ack "$id"
			;;
		*)
			say "safe point: $kind from the leader: \"$(body "$line")\""
			crew ack "$id"
			;;
		esac
	done <<<"$msgs"
}

# run_follow_ups does the queued follow-ups, oldest first, acknowledging
# each when done; a safe point after each may queue more.
run_follow_ups() {
	local i=0
	while [ "$i" -lt "${#FOLLOW_UPS[@]}" ]; do
		on_follow_up "${FOLLOW_UPS[$i]}"
		crew ack "$(field id "${FOLLOW_UPS[$i]}")"
		i=$((i + 1))
		safe_point
	done
}

# wait_for_mail blocks until the leader sends something this task has not
# acknowledged yet: crew inbox --follow prints it and is stopped.
wait_for_mail() {
	local line
	follow crew inbox --follow --json
	IFS= read -r line <&3 || true
	unfollow
	[ -n "$line" ] || { say "crew inbox --follow ended without a message"; return 1; }
}

# Default reactions; the notes worker has its own.
on_steer() { say "noted; nothing to change"; }
on_follow_up() { say "follow-up: nothing to do for \"$(body "$1")\""; }

# finish_task sends the final report and completes the task (which runs
# the task's done-when check, if it has one).
finish_task() {
	say "reports: \"$STATUS\""
	crew report "$STATUS" >/dev/null
	local out check
	out=$(crew task complete)
	check=$(printf '%s\n' "$out" | sed -n 's/^check passed: //p')
	say "completes its task${check:+ (its done-when check passed: $check)}"
}

work_vet() {
	say "runs go vet ./..."
	pace
	if out=$(go vet ./... 2>&1); then
		STATUS="done: go vet ./... found no problems"
	else
		STATUS="done: go vet ./... found problems: $(printf '%s' "$out" | head -n3 | tr '\n' ' ')"
	fi
	say "go vet is done; ends its turn without a word (a quiet worker) and waits for mail"
	NUDGED=
	while [ -z "$NUDGED" ]; do
		wait_for_mail
		safe_point
	done
	crew task complete >/dev/null
	say "completes its task"
}

work_test() {
	say "runs go test ./..."
	pace
	local out failed why answer
	if out=$(go test ./... 2>&1); then
		STATUS="done: go test ./... passes"
		safe_point
		finish_task
		return
	fi
	failed=$(printf '%s\n' "$out" | sed -n 's/^ *--- FAIL: \([^ ]*\).*/\1/p' | paste -sd '|' -)
	why=$(printf '%s\n' "$out" | sed -n 's/^ *\([A-Za-z0-9_]*_test\.go:[0-9]*: .*\)/\1/p' | head -n1)
	[ -n "$failed" ] || {
		say "go test failed to run: $out"
		return 1
	}
	say "go test fails: $failed"
	safe_point
	STATUS="waiting for the leader: fix or skip $failed?"
	say "asks the leader and blocks until it answers"
	answer=$(crew ask --wait "go test: $failed fails ($why). Fix it or skip it?")
	say "got the answer: \"$answer\""
	case $answer in
	*[Ss]kip*)
		if go test -skip "^($failed)\$" ./... >/dev/null 2>&1; then
			STATUS="done: go test ./... passes with $failed skipped; it fails because Reverse reverses bytes, not characters"
		else
			STATUS="done: go test ./... still fails with $failed skipped"
		fi
		say "reran go test -skip '^($failed)\$' ./..."
		;;
	*)
		crew report "cannot do \"$answer\" in this demo; failing the task" >/dev/null
		crew task fail --reason "the leader said: $answer"
		return 0
		;;
	esac
	safe_point
	finish_task
}

work_notes() {
	say "writes NOTES.md from go doc"
	pace
	local api
	api=$(go doc -short . | sed 's/^\(.*\)$/- `\1`/')
	printf '# textutil\n\n## API\n\n%s\n' "$api" >NOTES.md
	STATUS="NOTES.md has its API section; deciding on examples"
	safe_point
	local answer
	say "asks the leader and blocks until it answers"
	answer=$(crew ask --wait "NOTES.md lists $(go doc -short . | sed -n 's/^func \([A-Za-z]*\).*/\1/p' | paste -sd ',' - | sed 's/,/, /g'). Add a usage example for each, or keep it short?")
	say "got the answer: \"$answer\""
	case $answer in
	*"keep it short"* | *"Keep it short"*) ;;
	*) printf '\n## Examples\n\n    textutil.WordCount("a b c") // 3\n' >>NOTES.md ;;
	esac
	safe_point
	run_follow_ups
	STATUS="done: NOTES.md has $(grep -c '^## ' NOTES.md) sections: $(sed -n 's/^## //p' NOTES.md | paste -sd ',' - | sed 's/,/, /g')"
	finish_task
}

on_notes_steer() {
	# The steer's text after its first ": " is the issue to record.
	local text
	text=$(body "$1")
	printf '\n## Known issues\n\n- %s\n' "${text#*: }" >>NOTES.md
	say "added a Known issues section to NOTES.md"
}

on_notes_follow_up() {
	printf '\n## Running the tests\n\n    go test ./...\n' >>NOTES.md
	say "follow-up done: added how to run the tests to NOTES.md"
}

crew task start >/dev/null
say "started (task $CREW_TASK of run $CREW_RUN)"
case $CREW_TASK in
vet) work_vet ;;
test) work_test ;;
notes)
	on_steer() { on_notes_steer "$@"; }
	on_follow_up() { on_notes_follow_up "$@"; }
	work_notes
	;;
*)
	say "no such demo worker: $CREW_TASK"
	exit 2
	;;
esac
