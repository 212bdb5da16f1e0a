# demo-lib.sh: helpers shared by the leader and the workers of `make demo`
# (scripts/demo-leader.sh, scripts/demo-worker.sh). Source it; it needs
# only bash, coreutils and sed (no jq): JSON comes from `crew ... --json`,
# one object per line, and the few fields read here are plain strings.

# say prints one transcript line, "<who>  <text>", in one write so that the
# lines of concurrent processes never interleave mid-line. WHO is set by
# the sourcing script.
say() {
	printf '%s%-7s%s %s\n' "${DEMO_COLOR:-}" "$WHO" "${DEMO_RESET:-}" "$*"
}

# pace makes the transcript human-paced. It is never used to wait for
# another process (crew's blocking commands do that); CREW_DEMO_PACE=0
# (the end-to-end test) turns it off.
pace() {
	sleep "${CREW_DEMO_PACE:-0.3}"
}

# field NAME JSON prints the top-level string field NAME of a JSON object
# line written by crew. A body cannot fake a field: inside a JSON string
# every quote is escaped, so '"name":"' only matches a real key. Message
# lines hold each key once, at the top level.
field() {
	printf '%s\n' "$2" | sed -n 's/.*"'"$1"'":"\([^"]*\)".*/\1/p'
}

# body JSON prints the "body" of a message line, with the escapes the demo's
# bodies can hold (\" \\ \n \t) undone.
body() {
	printf '%s\n' "$1" |
		sed -n -E 's/.*"body":"(([^"\\]|\\.)*)".*/\1/p' |
		sed -e 's/\\"/"/g' -e 's/\\n/ /g' -e 's/\\t/ /g' -e 's/\\\\/\\/g'
}

# follow CMD... starts CMD (a `crew ... --follow --json` reader) in the
# background with its standard output on a FIFO, opens the FIFO as file
# descriptor 3 and sets FOLLOW_PID. Read records with `read -r line <&3`;
# stop it with unfollow. This is how a shell script consumes a blocking
# stream without a pipeline (a pipeline would wait for the reader to end).
follow() {
	local fifo
	fifo=$(mktemp -u "${TMPDIR:-/tmp}/crew-demo-fifo.XXXXXX")
	mkfifo -m 600 "$fifo"
	"$@" >"$fifo" 2>/dev/null &
	FOLLOW_PID=$!
	exec 3<"$fifo"
	rm -f "$fifo"
}

# unfollow stops the reader started by follow and closes descriptor 3.
unfollow() {
	exec 3<&-
	kill "$FOLLOW_PID" 2>/dev/null || true
	wait "$FOLLOW_PID" 2>/dev/null || true
}

# colors: set DEMO_COLOR/DEMO_RESET for WHO when standard output is a
# terminal (and NO_COLOR is not set).
colors() {
	DEMO_COLOR= DEMO_RESET= DEMO_DIM=
	if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then
		case $WHO in
		leader) DEMO_COLOR=$'\e[1m' ;;
		vet) DEMO_COLOR=$'\e[36m' ;;
		test) DEMO_COLOR=$'\e[33m' ;;
		*) DEMO_COLOR=$'\e[35m' ;;
		esac
		DEMO_RESET=$'\e[0m' DEMO_DIM=$'\e[2m'
	fi
}

# log_line prints one line of `crew events` (human form) as a transcript
# line, without its timestamp, and sets LAST_SEQ to its seq.
log_line() {
	local seq at rest
	read -r seq at rest <<<"$1"
	printf '%s        log #%-3s %s%s\n' "${DEMO_DIM:-}" "$seq" "$rest" "${DEMO_RESET:-}"
	LAST_SEQ=$seq
}

# start_log keeps the run's event log on screen, as a leader keeps
# `crew events --follow` open in a second terminal: every state change
# and message shows up as a "log #seq" line. stop_log ends it.
start_log() {
	local fifo
	fifo=$(mktemp -u "${TMPDIR:-/tmp}/crew-demo-log.XXXXXX")
	mkfifo -m 600 "$fifo"
	crew events --follow >"$fifo" 2>/dev/null &
	LOG_PID=$!
	exec 4<"$fifo"
	rm -f "$fifo"
	(
		LAST_SEQ=0
		while IFS= read -r line <&4; do
			log_line "$line"
		done
		# The follower was stopped: print what it had not read yet.
		crew events --since "$LAST_SEQ" | while IFS= read -r line; do
			log_line "$line"
		done
	) &
	LOG_PRINTER=$!
	exec 4<&-
}

# stop_log stops the log follower once everything of interest is in the
# log; the printer then prints the rest of the log and ends.
stop_log() {
	kill "$LOG_PID" 2>/dev/null || true
	wait "$LOG_PID" 2>/dev/null || true
	wait "$LOG_PRINTER" 2>/dev/null || true
}
