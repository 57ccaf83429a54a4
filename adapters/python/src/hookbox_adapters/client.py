"""A small client of Hookbox's `POST /v1/evaluate` (docs/server.md, "Evaluate").

Standard library only (urllib). One `HookboxClient` belongs to one session:
the hooks' state is kept per (tenant, session, plugin) on the server, and the
calls of one session are serialised there.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

# The most bytes of an evaluate answer read: a broken or hostile server cannot make the agent hold more.
MAX_ANSWER_BYTES = 8 * 1024 * 1024

#: The message a declined call's result carries when the hook gave none
#: (docs/contract.md, `skip-tool`).
DEFAULT_DECLINE_MESSAGE = "Tool call declined by the host application."


class HookboxError(Exception):
    """Base class of every error this package raises."""


class HookboxUnavailable(HookboxError):
    """The evaluate call failed (transport error, non-200 answer, bad JSON).

    With `fail_open=False` (the default) the adapters let it propagate, so a
    tool call is never run unchecked because the server was unreachable.
    """

    def __init__(self, message: str, status: int | None = None, body: Any = None):
        super().__init__(message)
        self.status = status
        self.body = body


class HookboxStop(HookboxError):
    """A hook ended the run. `verdict` is `abort`, `reject`, `skip-run` or
    `pause`; `reason` the hook's text; `plugin` the hook that said so (if
    known); `event` the event's type; `decision` the whole answer."""

    def __init__(self, verdict: str, reason: str | None, *, plugin: str | None, event: str, decision: "Decision"):
        self.verdict = verdict
        self.reason = reason
        self.plugin = plugin
        self.event = event
        self.decision = decision
        who = f" ({plugin})" if plugin else ""
        super().__init__(f"hookbox {verdict}{who} at {event}" + (f": {reason}" if reason else ""))


class HookboxAborted(HookboxStop):
    """A hook returned `abort` (or `pause`, which nothing here can resume)."""


class HookboxRejected(HookboxStop):
    """A hook returned `reject` (model-response, final-answer): the run ends
    and `reason` stands for its answer."""


class HookboxSkipRun(HookboxStop):
    """A hook returned `skip-run` at `run-start`: no model request is made,
    `reason` stands for the answer."""


@dataclass
class Decision:
    """The chain's answer to one event (docs/server.md, the evaluate answer)."""

    verdict: str
    terminal: dict[str, Any] | None = None
    arguments: str | None = None
    replace_arguments: str | None = None
    replace_result: str | None = None
    replace_content: list[dict[str, Any]] | None = None
    replace_user_content: list[dict[str, Any]] | None = None
    inject: list[str] = field(default_factory=list)
    approvals: list[dict[str, Any]] = field(default_factory=list)
    retry: Any = None
    raw: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> "Decision":
        return cls(
            verdict=body.get("verdict", "continue"),
            terminal=body.get("terminal"),
            arguments=body.get("arguments"),
            replace_arguments=body.get("replace_arguments"),
            replace_result=body.get("replace_result"),
            replace_content=body.get("replace_content"),
            replace_user_content=body.get("replace_user_content"),
            inject=list(body.get("inject") or []),
            approvals=list(body.get("approvals") or []),
            retry=body.get("retry"),
            raw=dict(body),
        )

    @property
    def reason(self) -> str | None:
        """The terminal directive's text (`{"action": ..., "value": ...}`)."""
        t = self.terminal
        if not isinstance(t, Mapping):
            return None
        value = t.get("value")
        if isinstance(value, str):
            return value
        if isinstance(value, list):  # content blocks
            return content_text(value)
        return None if value is None else json.dumps(value)

    @property
    def plugin(self) -> str | None:
        """The plugin whose directive ended the chain, if any."""
        if not self.terminal:
            return None
        action = self.terminal.get("action")
        for d in self.raw.get("directives") or []:
            if d.get("honoured") and d.get("action") == action:
                return d.get("plugin")
        return None


def content_text(blocks: Sequence[Mapping[str, Any]] | None) -> str:
    """The text of content blocks (`[{"type": "text", "text": ...}]`), joined."""
    return "".join(b.get("text", "") for b in blocks or [] if isinstance(b, Mapping))


def text_blocks(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text}]


def usage(input_tokens: int = 0, output_tokens: int = 0, cost: float = 0.0) -> dict[str, Any]:
    return {"input_tokens": int(input_tokens or 0), "output_tokens": int(output_tokens or 0),
            "cache_read_tokens": 0, "cache_write_tokens": 0, "cost": float(cost or 0.0)}


def arguments_text(args: Any) -> str:
    """Tool arguments as the JSON object text evaluate requires (`{}` for none)."""
    if args is None or args == "":
        return "{}"
    if isinstance(args, str):
        return args
    return json.dumps(args)


#: An approver decides a call a hook asked a person about (`ask-approval`):
#: `(tool_name, arguments_json, reasons) -> True | False | dict` (a dict
#: approves with those arguments). None: every such call is declined.
Approver = Callable[[str, str, list[str]], Any]


class HookboxClient:
    """Calls `POST /v1/evaluate` for one session.

    `url` is the server (`http://127.0.0.1:8787`), `key` a tenant key
    (`hbk_...`), `session_id` the session the hooks keep their state under
    (default: a fresh UUID), `plugins` the plugins to ask (default: every
    active one), `run_id` the run id the hooks see in their context.
    """

    def __init__(
        self,
        url: str,
        key: str,
        session_id: str | None = None,
        *,
        plugins: Sequence[str] | None = None,
        run_id: str | None = None,
        max_iterations: int | None = None,
        timeout: float = 30.0,
        fail_open: bool = False,
        approver: Approver | None = None,
    ):
        self.url = url.rstrip("/")
        self.key = key
        self.session_id = session_id or str(uuid.uuid4())
        self.plugins = list(plugins) if plugins is not None else None
        self.run_id = run_id
        self.max_iterations = max_iterations
        self.timeout = timeout
        self.fail_open = fail_open
        self.approver = approver
        self.turn = 0
        #: Every (event, decision) of this client, oldest first (for tests and audit).
        self.history: list[tuple[dict[str, Any], Decision]] = []

    # -- transport --------------------------------------------------------

    def evaluate(self, event: Mapping[str, Any], *, run_id: str | None = None) -> Decision:
        """Sends one event and returns the chain's decision (blocking)."""
        body: dict[str, Any] = {"session_id": self.session_id, "event": dict(event)}
        context: dict[str, Any] = {}
        rid = run_id or self.run_id
        if rid:
            context["run_id"] = rid
        if self.turn:
            context["turn"] = self.turn
        if self.max_iterations:
            context["max_iterations"] = self.max_iterations
        if context:
            body["context"] = context
        if self.plugins is not None:
            body["plugins"] = self.plugins
        request = urllib.request.Request(
            self.url + "/v1/evaluate",
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read(MAX_ANSWER_BYTES + 1)
                if len(raw) > MAX_ANSWER_BYTES:
                    raise ValueError(f"the answer is over {MAX_ANSWER_BYTES} bytes")
                answer = json.loads(raw.decode())
        except urllib.error.HTTPError as e:
            text = e.read(64 * 1024).decode(errors="replace")
            try:
                parsed: Any = json.loads(text)
            except ValueError:
                parsed = text
            message = parsed.get("message") if isinstance(parsed, dict) else text
            decision = self._unavailable(f"hookbox evaluate: HTTP {e.code}: {message}", e.code, parsed)
            self.history.append((dict(event), decision))
            return decision
        except (urllib.error.URLError, OSError, ValueError) as e:
            decision = self._unavailable(f"hookbox evaluate: {e}", None, None)
            self.history.append((dict(event), decision))
            return decision
        decision = Decision.from_json(answer)
        self.history.append((dict(event), decision))
        return decision

    def _unavailable(self, message: str, status: int | None, body: Any) -> Decision:
        if self.fail_open:
            return Decision(verdict="continue", raw={"error": message})
        raise HookboxUnavailable(message, status, body)

    async def aevaluate(self, event: Mapping[str, Any], *, run_id: str | None = None) -> Decision:
        """`evaluate` on a worker thread, so the event loop keeps running."""
        return await asyncio.to_thread(self.evaluate, event, run_id=run_id)

    # -- what a loop does with a decision ----------------------------------

    def stop_for(self, decision: Decision, event_type: str) -> None:
        """Raises the exception a terminal verdict stands for (abort,
        reject, skip-run, pause); returns for every other verdict."""
        verdict = decision.verdict
        kinds = {"abort": HookboxAborted, "reject": HookboxRejected, "skip-run": HookboxSkipRun}
        if verdict in kinds:
            raise kinds[verdict](verdict, decision.reason, plugin=decision.plugin, event=event_type, decision=decision)
        if verdict == "pause":
            # Nothing in a Python loop can resume a paused run: abort it, as
            # `hookbox run` does without --confirm.
            raise HookboxAborted("pause", "a hook paused the run and nothing here can resume it",
                                 plugin=None, event=event_type, decision=decision)

    def run_start(self, prompt: str, *, model: str = "", provider: str = "", run_id: str | None = None) -> str:
        """`run-start`: returns the prompt to run with (after any
        `replace-user-content`); raises `HookboxSkipRun` / `HookboxAborted`."""
        self.turn += 1
        if run_id:
            self.run_id = run_id
        rid = self.run_id or str(uuid.uuid4())
        self.run_id = rid
        event = {"type": "run-start", "run_id": rid, "session_id": self.session_id, "model": model,
                 "provider": provider, "user_content": text_blocks(prompt)}
        decision = self.evaluate(event)
        self.stop_for(decision, "run-start")
        if decision.replace_user_content is not None:
            return content_text(decision.replace_user_content)
        return prompt

    async def arun_start(self, prompt: str, **kw: Any) -> str:
        return await asyncio.to_thread(self.run_start, prompt, **kw)

    def before_tool_call(self, iteration: int, call_id: str, name: str, arguments: str,
                         *, approved: bool = False) -> "ToolVerdict":
        """`before-tool-call`: whether to run the call and with which
        arguments; raises for abort/reject/pause. `ask-approval` goes to
        the client's `approver`; arguments it gives are checked by the chain
        again, where a guard's veto still holds but a second ask is taken as
        answered (`approved`)."""
        event = {"type": "before-tool-call", "iteration": max(iteration, 1),
                 "call": {"id": call_id, "name": name, "arguments": arguments}}
        decision = self.evaluate(event)
        self.stop_for(decision, "before-tool-call")
        if decision.verdict == "skip-tool":
            return ToolVerdict(False, arguments, decision.reason or DEFAULT_DECLINE_MESSAGE, decision)
        run_with = decision.arguments or arguments
        if decision.verdict == "ask-approval" and not approved:
            reasons = [a.get("reason", "") for a in decision.approvals]
            if self.approver is None:
                return ToolVerdict(False, run_with, "Tool call needs a person's approval and no approver is set: "
                                   + "; ".join(reasons), decision)
            answer = self.approver(name, run_with, reasons)
            if isinstance(answer, Mapping):
                # Approved with other arguments: every guard checks them again.
                return self.before_tool_call(iteration, call_id, name, json.dumps(answer), approved=True)
            if not answer:
                return ToolVerdict(False, run_with, "Tool call denied by a person: " + "; ".join(reasons), decision)
        return ToolVerdict(True, run_with, None, decision)

    async def abefore_tool_call(self, *a: Any) -> "ToolVerdict":
        return await asyncio.to_thread(self.before_tool_call, *a)

    def tool_call_result(self, iteration: int, call_id: str, name: str, arguments: str, result: str,
                         *, success: bool = True, duration_ms: int = 0) -> str | None:
        """`tool-call-result`: returns the text the model should see instead
        of `result` (a `replace-result`), or None to keep it; raises for
        abort/pause."""
        event = {"type": "tool-call-result", "iteration": max(iteration, 1), "tool_name": name,
                 "tool_call_id": call_id, "result": result, "truncated": False, "success": success,
                 "duration_ms": int(duration_ms), "arguments": arguments}
        decision = self.evaluate(event)
        self.stop_for(decision, "tool-call-result")
        return decision.replace_result

    async def atool_call_result(self, *a: Any, **kw: Any) -> str | None:
        return await asyncio.to_thread(lambda: self.tool_call_result(*a, **kw))

    def final_answer(self, text: str, *, input_tokens: int = 0, output_tokens: int = 0) -> str:
        """`final-answer`: returns the answer to give (after any
        `replace-content`); raises `HookboxRejected` / `HookboxAborted`."""
        event = {"type": "final-answer", "text": text, "content": text_blocks(text), "finish_reason": "stop",
                 "usage": usage(input_tokens, output_tokens)}
        decision = self.evaluate(event)
        self.stop_for(decision, "final-answer")
        if decision.replace_content is not None:
            return content_text(decision.replace_content)
        return text

    async def afinal_answer(self, text: str, **kw: Any) -> str:
        return await asyncio.to_thread(lambda: self.final_answer(text, **kw))


@dataclass
class ToolVerdict:
    """What to do with one tool call: `run` it with `arguments` (JSON text),
    or not, giving the model `message`."""

    run: bool
    arguments: str
    message: str | None
    decision: Decision


def text_of(value: Any) -> str:
    """A tool's arguments or output as text: a string as it is, a pydantic model or JSON value as JSON."""
    if isinstance(value, str):
        return value
    dump = getattr(value, "model_dump_json", None)
    if callable(dump):
        return dump()
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
