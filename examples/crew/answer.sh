#!/usr/bin/env bash
# The leader's answers. crew watch --agent leader runs this once per
# message a worker sends: the message as JSON on standard input, and
# CREW_MESSAGE_ID, CREW_RUN, CREW_TASK, CREW_KIND in the environment.
#
# A real leader would read the question (jq -r .body) and decide, or hand
# it to an agent; this one has a fixed answer per task.
set -euo pipefail
message=$(cat)
[ "$CREW_KIND" = question ] || exit 0 # reports need no answer
echo "question from $CREW_TASK: $message"
case "$CREW_TASK" in
inventory) answer="Skip .git and .crew; count files without an extension as (none)." ;;
todos) answer="Search every text file; one hit per line as path:line: text." ;;
*) answer="Use your judgement." ;;
esac
crew respond "$CREW_TASK" "$answer"
