#!/bin/sh
# An example workflow that needs authority: asks the run's harness to implement the
# objective, then asks the host to authorize pushing the result. Under a policy that says
# `ask` for pushes (examples/policy.json), the run parks on an approval; once approved, a
# second `harn work run` resumes it: the agent call is answered from the transcript and the
# push is authorized. It speaks harn's JSON Lines protocol on stdin/stdout.
read -r start
objective=$(printf '%s' "$start" | sed -n 's/.*"objective":"\([^"]*\)".*/\1/p')
echo '{"op":"stage","name":"implement"}'
printf '{"op":"agent","id":"implement","prompt":"%s"}\n' "$objective"
read -r reply
case "$reply" in
  *'"ok":true'*) ;;
  *) echo '{"op":"result","ok":false,"error":"the agent call failed"}'; exit 1 ;;
esac
echo '{"op":"evidence","kind":"review","status":"passed","label":"the agent answered","acceptanceIds":["accept-1"]}'
echo '{"op":"stage","name":"ship"}'
echo '{"op":"authorize","id":"push","action":"push","target":"main"}'
read -r verdict
case "$verdict" in
  *'"verdict":"allow"'*)
    echo '{"op":"evidence","kind":"push","status":"passed","label":"push authorized","acceptanceIds":["accept-2"]}'
    echo '{"op":"result","ok":true,"summary":"implemented and authorized to push"}'
    ;;
  *)
    echo '{"op":"result","ok":false,"error":"the push was not authorized"}'
    exit 1
    ;;
esac
