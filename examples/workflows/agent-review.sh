#!/bin/sh
# An example workflow: asks the run's harness for one agent call with the work item's
# objective as the prompt, records the reply as evidence for the first acceptance
# statement, and reports the result. It speaks harn's JSON Lines protocol on stdin/stdout.
read -r start
objective=$(printf '%s' "$start" | sed -n 's/.*"objective":"\([^"]*\)".*/\1/p')
echo '{"op":"stage","name":"implement"}'
printf '{"op":"agent","id":"implement","prompt":"%s"}\n' "$objective"
read -r reply
case "$reply" in
  *'"ok":true'*)
    echo '{"op":"evidence","kind":"review","status":"passed","label":"the agent answered","acceptanceIds":["accept-1"]}'
    echo '{"op":"result","ok":true,"summary":"the agent completed the objective"}'
    ;;
  *)
    echo '{"op":"evidence","kind":"review","status":"failed","label":"the agent failed","acceptanceIds":["accept-1"]}'
    echo '{"op":"result","ok":false,"error":"the agent call failed"}'
    ;;
esac
