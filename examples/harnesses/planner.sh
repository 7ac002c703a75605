#!/bin/sh
# A scripted planner harness for examples and tests: whatever it is asked, it proposes one
# new work item, `fix`, made from the `ship` template and depending on nothing, as the
# replanning schema asks; asked for a revision, it marks the title "(revised)". It logs each
# call to $HARN_CALLS_FILE when that is set.
prompt=$(cat)
[ -n "$HARN_CALLS_FILE" ] && echo "planner" >> "$HARN_CALLS_FILE"
title="Fix the parser"
case "$prompt" in *"asked for a revision"*) title="Fix the parser (revised)" ;; esac
printf '{"decision": "apply", "rationale": "the root cannot pass as planned; replace it with a fix", "work": [{"key": "fix", "title": "%s", "objective": "fix the parser so the CLI works", "acceptance": ["the agent answered"], "dependencies": [], "template": "ship"}]}\n' "$title"
