#!/usr/bin/env python3
"""A Claude Code command hook in Python, the way people write them today: the
same policy as the deny-tools plugin with `paths = [".env"]` (a path argument,
or a word of a shell command, with a `.env` component is denied). Reads the
hook input on stdin, prints Claude Code's answer. agent_hooks_bench compares
it with Hookbox (BENCHMARKS.md)."""
import json
import re
import sys


def denied(path):
    return ".env" in [c for c in path.split("/") if c not in ("", ".")]


def main():
    event = json.load(sys.stdin)
    args = event.get("tool_input") or {}
    words = []
    for key in ("path", "file", "file_path", "filename", "dir", "directory"):
        if isinstance(args.get(key), str):
            words.append(args[key])
    for key in ("command", "cmd"):
        if isinstance(args.get(key), str):
            words += [w for w in re.split(r"[\s;|&<>()$`=\"'\\]+", args[key]) if w and not w.startswith("-")]
    for word in words:
        if denied(word):
            reason = f"deny-tools: `{event.get('tool_name')}` on `{word}` is denied (pattern `.env`)"
            print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                                     "permissionDecision": "deny",
                                                     "permissionDecisionReason": reason}}))
            return
    print("{}")


main()
