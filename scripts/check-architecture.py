#!/usr/bin/env python3
"""Checks the architecture rules of the Rust workspace (run by scripts/test.sh):

1. no module cycles inside a crate: module A depends on module B when A's
   file(s) name `crate::B` (or `super::B` from a top-level module); a cycle in
   that graph fails;
2. the crates depend one way: contract <- sandbox <- hookbox <- agents <- server <- cli and
   contract <- providers <- hookbox, and the sandbox has none of the agent,
   provider, HTTP, CLI or SQLite dependencies (read from `cargo tree`);
3. no source file over 600 lines, except test files (`tests.rs`,
   `*_tests.rs`, files under `tests/` or `benches/`).
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATES = ["contract", "sandbox", "providers", "hookbox", "agents", "server", "cli"]
MAX_LINES = 600
problems = []


def modules(src):
    """Top-level module name -> list of files belonging to it."""
    out = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src)
            top = rel.split(os.sep)[0]
            name = top[:-3] if top.endswith(".rs") else top
            if name in ("lib", "main", "mod"):
                continue
            out.setdefault(name, []).append(os.path.join(dirpath, f))
    return out


def strip_comments(text):
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def find_cycle(graph):
    state = {}
    stack = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                cycle = visit(m)
                if cycle:
                    return cycle
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            cycle = visit(n)
            if cycle:
                return cycle
    return None


for crate in CRATES:
    src = os.path.join(ROOT, "crates", crate, "src")
    mods = modules(src)
    graph = {}
    for name, files in mods.items():
        deps = set()
        for path in files:
            text = strip_comments(open(path, encoding="utf-8").read())
            if os.path.basename(path) == "tests.rs":
                continue  # tests may use anything in the crate
            text = text.split("#[cfg(test)]", 1)[0]
            for m in re.finditer(r"\bcrate::([a-z_][a-z0-9_]*)", text):
                deps.add(m.group(1))
            if os.path.dirname(path) == src:  # a top-level module: super:: is the crate root
                for m in re.finditer(r"\bsuper::([a-z_][a-z0-9_]*)", text):
                    deps.add(m.group(1))
        graph[name] = {d for d in deps if d in mods and d != name}
    cycle = find_cycle(graph)
    if cycle:
        problems.append(f"crates/{crate}: module cycle {' -> '.join(cycle)}")

for dirpath, _, files in os.walk(os.path.join(ROOT)):
    if any(part in dirpath for part in ("/target", "/.git", "/fuzz", "/node_modules", "/toolchains")):
        continue
    for f in files:
        if not f.endswith(".rs"):
            continue
        path = os.path.join(dirpath, f)
        rel = os.path.relpath(path, ROOT)
        is_test = f == "tests.rs" or f.endswith("_tests.rs") or "/tests/" in "/" + rel or "/benches/" in "/" + rel
        n = sum(1 for _ in open(path, encoding="utf-8"))
        if n > MAX_LINES and not is_test:
            problems.append(f"{rel}: {n} lines (over {MAX_LINES}; split it by concern)")

EXCLUDED = ["hookbox-providers", "hookbox v", "reqwest", "hyper", "clap", "tracing-subscriber", "rusqlite", "libsqlite3"]
tree = subprocess.run(
    ["cargo", "tree", "-p", "hookbox-sandbox", "-e", "normal", "--prefix", "none"],
    cwd=ROOT, capture_output=True, text=True,
)
if tree.returncode != 0:
    problems.append(f"cargo tree -p hookbox-sandbox failed: {tree.stderr.strip()}")
else:
    for line in tree.stdout.splitlines():
        for bad in EXCLUDED:
            if line.startswith(bad + " ") or line.startswith(bad):
                if bad == "hookbox v" and not line.startswith("hookbox v"):
                    continue
                problems.append(f"hookbox-sandbox depends on {line.strip()}")

if problems:
    print("architecture check failed:", file=sys.stderr)
    for p in problems:
        print("  " + p, file=sys.stderr)
    sys.exit(1)
print("architecture: no module cycles, one-way crates, no file over 600 lines, sandbox free of agent/HTTP/CLI/SQLite deps")
