#!/bin/sh
# A scripted plan reviewer for examples and tests: it asks for a revision (with a blocking
# finding) of any plan whose work is not marked "(revised)", and approves one that is.
prompt=$(cat)
[ -n "$HARN_CALLS_FILE" ] && echo "reviewer" >> "$HARN_CALLS_FILE"
case "$prompt" in
  *"(revised)"*) echo '{"verdict": "approve", "rationale": "the plan is sound", "findings": []}' ;;
  *) echo '{"verdict": "revise", "rationale": "name the fix precisely", "findings": [{"code": "vague-title", "severity": "blocking", "summary": "the title is vague", "recommendation": "say it is revised"}]}' ;;
esac
