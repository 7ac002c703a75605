#!/bin/sh
# A scripted mission planner for examples and tests: it reads how many milestones are
# completed from the prompt; below two, it proposes the next milestone as one work item made
# from the `ship` template; at two, it declares the mission complete.
prompt=$(cat)
[ -n "$HARN_CALLS_FILE" ] && echo "mission-planner" >> "$HARN_CALLS_FILE"
done=$(printf '%s\n' "$prompt" | sed -n 's/^Milestones completed: \([0-9]*\).*/\1/p' | head -n 1)
done=${done:-0}
if [ "$done" -ge 2 ]; then
  echo '{"decision": "complete", "rationale": "both milestones are accepted", "work": []}'
  exit 0
fi
next=$((done + 1))
printf '{"decision": "apply", "rationale": "milestone %s", "work": [{"key": "m%s", "title": "Milestone %s", "objective": "deliver milestone %s", "acceptance": ["the agent answered"], "dependencies": [], "template": "ship"}], "milestone": {"sequence": %s, "title": "Milestone %s", "objective": "deliver milestone %s", "acceptance": ["it works"]}}\n' \
  "$next" "$next" "$next" "$next" "$next" "$next" "$next"
