"""Fixtures: a real `hookbox serve` (HOOKBOX_BIN, default target/debug/hookbox)
with one tenant and the test plugins, and a scripted fake OpenAI Chat
Completions server on loopback."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import tempfile
import threading
import time
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from hookbox_adapters import HookboxClient

REPO = Path(__file__).resolve().parents[3]
HOOKBOX_BIN = Path(os.environ.get("HOOKBOX_BIN", REPO / "target/debug/hookbox"))
PLUGINS = Path(os.environ.get("HOOKBOX_PLUGINS", REPO / "target/plugins/wasm32-wasip2/debug"))

# name -> (component, config). Each test picks the plugins its session asks.
TEST_PLUGINS = {
    "deny-tools": ("deny_tools.wasm", {"paths": [".env"]}),
    "rewrite": ("scripted.wasm", {
        "only_tool": "read_file",
        "before-tool-call": 'replace-arguments:{"path": "safe.txt"}',
        "tool-call-result": "replace-result:REDACTED (ran with {arguments})",
    }),
    "aborter": ("scripted.wasm", {"only_tool": "read_file", "before-tool-call": "abort:stop now"}),
    "rejecter": ("scripted.wasm", {"final-answer": "reject:no answers today"}),
    "answer-rewriter": ("scripted.wasm", {"final-answer": "replace-content:the answer, as the policy wants it"}),
    "skipper": ("scripted.wasm", {"run-start": "skip-run:not today"}),
    "asker": ("scripted.wasm", {"only_tool": "read_file", "before-tool-call": "ask-approval:{tool} needs a person"}),
}


def _request(method, url, *, key=None, body=None, headers=None, data=None):
    h = dict(headers or {})
    if key:
        h["Authorization"] = f"Bearer {key}"
    if body is not None:
        data = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, headers=h, method=method)
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read() or b"null")


def _multipart(fields):
    boundary = "hookbox" + secrets.token_hex(8)
    out = b""
    for name, (filename, content, ctype) in fields.items():
        disp = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out += f"--{boundary}\r\nContent-Disposition: {disp}\r\nContent-Type: {ctype}\r\n\r\n".encode()
        out += content + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return out, f"multipart/form-data; boundary={boundary}"


class Hookbox:
    def __init__(self, url, key):
        self.url = url
        self.key = key

    def client(self, *plugins, **kw):
        return HookboxClient(self.url, self.key, session_id=f"test-{uuid.uuid4()}", plugins=list(plugins), **kw)


@pytest.fixture(scope="session")
def hookbox():
    if not HOOKBOX_BIN.exists():
        pytest.fail(f"{HOOKBOX_BIN} is missing: build it (cargo build -p hookbox-cli) or set HOOKBOX_BIN")
    for wasm in {c for c, _ in TEST_PLUGINS.values()}:
        if not (PLUGINS / wasm).exists():
            pytest.fail(f"{PLUGINS / wasm} is missing: build the plugins (scripts/build-plugins.sh)")
    with tempfile.TemporaryDirectory(prefix="hookbox-py-") as d:
        d = Path(d)
        (d / "server.toml").write_text('data_dir = "data"\n')
        operator = "hbo_" + secrets.token_hex(32)
        env = dict(os.environ, HOOKBOX_OPERATOR_KEY=operator)
        log = open(d / "serve.log", "w+")
        proc = subprocess.Popen(
            [str(HOOKBOX_BIN), "serve", "--config", str(d / "server.toml"), "--listen", "127.0.0.1:0"],
            stdout=log, stderr=subprocess.STDOUT, env=env,
        )
        try:
            url = None
            deadline = time.monotonic() + 60
            while url is None:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    pytest.fail(f"hookbox serve did not start:\n{log.read()}")
                log.seek(0)
                for line in log:
                    if "listening on " in line:
                        url = line.split("listening on ", 1)[1].strip()
                time.sleep(0.05)
            key = _request("POST", url + "/v1/admin/tenants", key=operator, body={"name": "pytest"})["key"]
            for name, (wasm, config) in TEST_PLUGINS.items():
                data, ctype = _multipart({
                    "component": (wasm, (PLUGINS / wasm).read_bytes(), "application/wasm"),
                    "manifest": (None, json.dumps({"config": config}).encode(), "application/json"),
                })
                _request("POST", f"{url}/v1/plugins/{name}/versions", key=key, data=data,
                         headers={"Content-Type": ctype})
                _request("POST", f"{url}/v1/plugins/{name}/versions/1/activate", key=key)
            yield Hookbox(url, key)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()


class FakeModel:
    """A scripted OpenAI Chat Completions server: each request takes the next
    step (`("tool", name, arguments_dict)` or `("text", answer)`); it keeps
    every request body it received."""

    def __init__(self):
        self.script: list[tuple] = []
        self.requests: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                fake.requests.append(body)
                if not self.path.endswith("/chat/completions"):
                    self.send_error(404)
                    return
                step = fake.script.pop(0) if fake.script else ("text", "(script exhausted)")
                n = len(fake.requests)
                if step[0] == "tool":
                    message = {"role": "assistant", "content": None, "tool_calls": [{
                        "id": f"call_{n}", "type": "function",
                        "function": {"name": step[1], "arguments": json.dumps(step[2])},
                    }]}
                    finish = "tool_calls"
                else:
                    message = {"role": "assistant", "content": step[1]}
                    finish = "stop"
                answer = json.dumps({
                    "id": f"chatcmpl-{n}", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model", "fake"),
                    "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def tool_messages(self, n):
        """The `tool` messages of request `n` (0-based)."""
        return [m for m in self.requests[n].get("messages", []) if m.get("role") == "tool"]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_model():
    fake = FakeModel()
    yield fake
    fake.close()


class Files:
    """What the test tools touched."""

    def __init__(self):
        self.calls: list[tuple[str, str]] = []
        self.content = {"a.txt": "secret text of a.txt", "safe.txt": "harmless text", ".env": "KEY=1"}

    def read_file(self, path: str) -> str:
        self.calls.append(("read_file", path))
        return self.content.get(path, "no such file")

    def delete_file(self, path: str) -> str:
        self.calls.append(("delete_file", path))
        self.content.pop(path, None)
        return f"deleted {path}"


@pytest.fixture
def files():
    return Files()
