#!/usr/bin/env bash
# A Claude Code command hook in bash (no jq): the same policy as the deny-tools
# plugin with `paths = [".env"]` for a `file_path`/`path` argument or a shell
# `command`. Reads the hook input on stdin, prints Claude Code's answer.
# agent_hooks_bench compares it with Hookbox (BENCHMARKS.md).
input=$(cat)
re='"(file_path|path|command)": *"([^"]*)"'
if [[ $input =~ $re ]]; then
  value=${BASH_REMATCH[2]}
  for word in ${value//[;|&<>()\$\`=\']/ }; do
    IFS=/ read -ra parts <<< "$word"
    for part in "${parts[@]}"; do
      if [[ $part == ".env" ]]; then
        printf '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"deny-tools: `%s` is denied (pattern `.env`)"}}\n' "$word"
        exit 0
      fi
    done
  done
fi
echo '{}'
