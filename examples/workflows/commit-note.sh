#!/bin/sh
# An example workflow for `--isolation worktree`: writes the objective into NOTES.md and
# commits it on the item's branch; harn attests the commit and its diff in the proof, and
# `harn work land` brings exactly that onto the branch the worktree was made from. It speaks
# harn's JSON Lines protocol on stdin/stdout.
read -r start
objective=$(printf '%s' "$start" | sed -n 's/.*"objective":"\([^"]*\)".*/\1/p')
printf '# Notes\n\n%s\n' "$objective" > NOTES.md
if ! git add NOTES.md || ! git commit -qm "notes: $objective"; then
  echo '{"op":"result","ok":false,"error":"git could not commit NOTES.md"}'
  exit 1
fi
echo '{"op":"evidence","kind":"test","status":"passed","label":"NOTES.md committed","acceptanceIds":["accept-1"]}'
echo '{"op":"result","ok":true,"summary":"wrote and committed NOTES.md"}'
