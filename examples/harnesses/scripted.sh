#!/bin/sh
# A scripted agent harness for examples and tests: reads the prompt on stdin and answers
# on stdout, with no agent installed. Words in the prompt choose what it does:
#   UPSTREAM  fail as a vendor refusal would ("rate limit"), an uncharged upstream failure
#   FAIL      fail plainly (charged)
#   HANG      never answer (the host's timeout kills it and anything it started)
#   JSON      answer {"verdict":"pass"}
#   BADJSON   answer prose first, then the JSON value when asked to repair it
#   NEVERJSON answer prose however often it is asked
# Each call appends "model=<HARN_MODEL> key=<OPENAI_API_KEY>" to $HARN_CALLS_FILE when that
# is set, so tests can see what a call was given.
prompt=$(cat)
[ -n "$HARN_CALLS_FILE" ] && echo "model=$HARN_MODEL key=$OPENAI_API_KEY" >> "$HARN_CALLS_FILE"
case "$prompt" in
  *UPSTREAM*) echo "error: rate limit exceeded, try again later" >&2; exit 1 ;;
  *FAIL*) echo "could not complete the task" >&2; exit 1 ;;
  *HANG*) sleep 300 & echo $! > "${HARN_HANG_PID_FILE:-/dev/null}"; sleep 300 ;;
  *NEVERJSON*) echo "I think it passes"; exit 0 ;;
  *"previous reply was rejected"*) echo '{"verdict":"pass"}'; exit 0 ;;
  *BADJSON*) echo "I think it passes"; exit 0 ;;
  *JSON*) echo '{"verdict":"pass"}'; exit 0 ;;
esac
printf 'done: %s\n' "$(printf '%s' "$prompt" | head -n 1)"
