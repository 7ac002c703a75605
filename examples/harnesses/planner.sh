#!/bin/sh
# A scripted planner harness for examples and tests: whatever it is asked, it proposes one
# new work item, `fix`, made from the `ship` template and depending on nothing, as the
# replanning schema asks. It logs each call to $HARN_CALLS_FILE when that is set.
cat > /dev/null
[ -n "$HARN_CALLS_FILE" ] && echo "planner" >> "$HARN_CALLS_FILE"
cat <<'JSON'
{"decision": "apply", "rationale": "the root cannot pass as planned; replace it with a fix",
 "work": [{"key": "fix", "title": "Fix the parser", "objective": "fix the parser so the CLI works",
           "acceptance": ["the agent answered"], "dependencies": [], "template": "ship"}]}
JSON
