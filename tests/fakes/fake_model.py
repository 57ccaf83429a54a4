#!/usr/bin/env python3
"""A loopback fake model API for the real Codex CLI and Gemini CLI
(tests/tests/real_cli_agents.rs). Python standard library only.

Usage: fake_model.py API COMMAND LOG
  API      `codex`  : the OpenAI Responses API (`POST /v1/responses`, streamed
                      as Server-Sent Events; `GET /v1/models` an empty list).
           `gemini` : the Gemini API (`POST /v1beta/models/M:streamGenerateContent`
                      as SSE, `:generateContent`, `:countTokens`).
  COMMAND  the shell command the scripted model runs.
  LOG      every request is appended here, one JSON object a line:
           {"method", "path", "body"}.

The script: a request that carries no tool result yet is answered with one
call of the CLI's shell tool running COMMAND; a request that carries a tool
result (the model has seen what the tool did) is answered with the text
`done`, which ends the CLI's turn. Binds 127.0.0.1 port 0 and prints
`PORT <n>` on stdout once it listens. Exits when stdin closes (the test
keeps a pipe open), so a killed test leaves no server behind.
"""
import json
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

API, COMMAND, LOG = sys.argv[1], sys.argv[2], sys.argv[3]
MAX_BODY = 16 << 20
LOCK = threading.Lock()


def record(entry):
    with LOCK, open(LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def codex_answer(req):
    items = req.get("input") or []
    seen_result = any(isinstance(i, dict) and str(i.get("type", "")).endswith("_call_output") for i in items)
    if seen_result:
        item = {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
                "content": [{"type": "output_text", "text": "done", "annotations": []}]}
    else:
        names = [t.get("name") for t in (req.get("tools") or []) if isinstance(t, dict)]
        # Codex 0.171 offers its shell as `exec_command {cmd}`; older ones as `shell_command` / `shell`.
        if "exec_command" in names:
            name, args = "exec_command", {"cmd": COMMAND}
        elif "shell_command" in names:
            name, args = "shell_command", {"command": COMMAND}
        else:
            name, args = "shell", {"command": ["bash", "-lc", COMMAND]}
        item = {"type": "function_call", "id": "fc_1", "status": "completed", "call_id": "call_1",
                "name": name, "arguments": json.dumps(args)}
    rid = "resp_" + uuid.uuid4().hex[:12]
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
    events = [
        ("response.created", {"type": "response.created", "response": {"id": rid}}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "response": {
            "id": rid, "status": "completed", "output": [item], "usage": usage}}),
    ]
    return "".join("event: %s\ndata: %s\n\n" % (e, json.dumps(d)) for e, d in events)


def gemini_answer(req):
    contents = req.get("contents") or []
    tools = [fd.get("name") for t in (req.get("tools") or []) for fd in (t.get("functionDeclarations") or [])]
    seen_result = any("functionResponse" in p for c in contents for p in (c.get("parts") or []))
    if seen_result or "run_shell_command" not in tools:
        parts = [{"text": "done"}]
    else:
        parts = [{"functionCall": {"name": "run_shell_command",
                                   "args": {"command": COMMAND, "description": "hookbox test"}}}]
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            "modelVersion": "gemini-2.5-flash"}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, code, body, ctype="application/json"):
        data = body.encode()
        self.send_response(code)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        record({"method": "GET", "path": self.path, "body": None})
        if API == "codex":
            return self.send(200, json.dumps({"object": "list", "data": [], "models": []}))
        self.send(200, json.dumps({"models": []}))

    def do_POST(self):
        length = min(int(self.headers.get("content-length") or 0), MAX_BODY)
        raw = self.rfile.read(length)
        try:
            req = json.loads(raw or b"{}")
        except ValueError:
            req = {"unparsed": raw.decode("utf-8", "replace")}
        record({"method": "POST", "path": self.path, "body": req})
        path = self.path.split("?")[0]
        if API == "codex" and path.endswith("/responses"):
            return self.send(200, codex_answer(req), "text/event-stream")
        if API == "gemini" and path.endswith(":streamGenerateContent"):
            return self.send(200, "data: %s\r\n\r\n" % json.dumps(gemini_answer(req)), "text/event-stream")
        if API == "gemini" and path.endswith(":generateContent"):
            return self.send(200, json.dumps(gemini_answer(req)))
        if API == "gemini" and path.endswith(":countTokens"):
            return self.send(200, '{"totalTokens": 10}')
        self.send(404, json.dumps({"error": {"code": 404, "message": "not found: " + path}}))


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("PORT %d" % server.server_address[1], flush=True)
    sys.stdin.read()  # until the test closes the pipe (or dies)
    server.shutdown()


if __name__ == "__main__":
    main()
