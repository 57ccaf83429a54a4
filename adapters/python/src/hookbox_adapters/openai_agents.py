"""Hookbox for the OpenAI Agents SDK (`openai-agents`): run hooks plus
guarded function tools, sending the run's events to `POST /v1/evaluate`.

    from hookbox_adapters import HookboxClient
    from hookbox_adapters.openai_agents import HookboxRunHooks

    hooks = HookboxRunHooks(HookboxClient("http://127.0.0.1:8787", key, session_id="chat-42"))
    result = await hooks.run(agent, "Delete the file .env")     # or:
    result = await Runner.run(hooks.protect(agent), "...", hooks=hooks)

Why the tools are wrapped rather than given tool guardrails: a tool input
guardrail can allow, reject or raise, but cannot change the arguments the
tool runs with (`replace-arguments`), and an output guardrail's
`reject_content` marks the output as an error. `protect` copies the agent
and each `FunctionTool` on it (and on its handoff agents) with an invoker
that asks Hookbox first (`before-tool-call`: a declined call is not run and
the model gets the reason as the tool's result; rewritten arguments are what
the tool runs with), then reports the result (`tool-call-result`:
`replace-result` is what the model sees). The run hooks send `run-start`
(`on_agent_start`, once per run) and `final-answer` (`on_agent_end`), count
iterations (`on_llm_end`), and raise `HookboxAborted` / `HookboxRejected` /
`HookboxSkipRun` out of `Runner.run` when a hook ends the run.
"""

from __future__ import annotations

import copy
import time
from typing import Any

from agents import Agent, FunctionTool, RunHooks, Runner
from agents.exceptions import AgentsException

from .client import HookboxClient, HookboxError, arguments_text, text_of

__all__ = ["HookboxRunHooks", "guard_tool"]


_AGENTS_KINDS: dict[type, type] = {}


def _agents_error(e: HookboxError) -> HookboxError:
    """`e`, also made an `AgentsException`: the SDK wraps any other exception
    a tool raises in a `UserError`, and it must reach the caller as the
    `HookboxAborted` (...) it is."""
    if isinstance(e, AgentsException):
        return e
    cls = type(e)
    kind = _AGENTS_KINDS.get(cls)
    if kind is None:
        kind = _AGENTS_KINDS[cls] = type(cls.__name__, (cls, AgentsException), {"__module__": cls.__module__})
    e.__class__ = kind
    e.run_data = None  # type: ignore[attr-defined]
    return e


def guard_tool(tool: FunctionTool, hooks: "HookboxRunHooks") -> FunctionTool:
    """A copy of `tool` whose calls go through `hooks`' Hookbox chain."""
    if getattr(tool, "__hookbox_guarded__", False):
        return tool
    original = tool.on_invoke_tool
    guarded = copy.copy(tool)
    name = tool.name

    async def invoke(ctx, input):  # noqa: A002 - the SDK's parameter name
        try:
            return await _invoke(ctx, input)
        except HookboxError as e:
            raise _agents_error(e) from None

    async def _invoke(ctx, input):  # noqa: A002
        client = hooks.client
        iteration = max(hooks.iteration, 1)
        call_id = getattr(ctx, "tool_call_id", None) or ""
        arguments = arguments_text(input)
        verdict = await client.abefore_tool_call(iteration, call_id, name, arguments)
        if not verdict.run:
            message = verdict.message or ""
            replaced = await client.atool_call_result(
                iteration, call_id, name, verdict.arguments, message, success=False
            )
            return replaced if replaced is not None else message
        run_with = verdict.arguments
        if run_with != input and hasattr(ctx, "_function_tool_arguments"):
            # Arguments the SDK prepared for the model's text are not these.
            ctx._function_tool_arguments = None
        started = time.monotonic()
        result = await original(ctx, run_with)
        replaced = await client.atool_call_result(
            iteration, call_id, name, run_with, text_of(result), success=True,
            duration_ms=int((time.monotonic() - started) * 1000),
        )
        return replaced if replaced is not None else result

    guarded.on_invoke_tool = invoke
    guarded.__hookbox_guarded__ = True  # type: ignore[attr-defined]
    return guarded


class HookboxRunHooks(RunHooks[Any]):
    """Run hooks that put an agent run under the tenant's Hookbox chain.

    Use one instance per run at a time (it counts the run's iterations); it
    may be reused for the session's next run. `final_output` holds the
    answer after any `replace-content` (the SDK's `RunResult.final_output`
    cannot be changed from a hook; `run` applies it for you).
    """

    def __init__(self, client: HookboxClient, *, send_run_start: bool = True, send_final_answer: bool = True):
        self.client = client
        self.send_run_start = send_run_start
        self.send_final_answer = send_final_answer
        self.iteration = 0
        self.final_output: Any = None
        self._started = False

    # -- wiring --------------------------------------------------------------

    def protect(self, agent: Agent[Any], _seen: dict[int, Agent[Any]] | None = None) -> Agent[Any]:
        """A copy of `agent` (and of the agents it hands off to) whose
        function tools ask Hookbox before and after each call."""
        seen = {} if _seen is None else _seen
        if id(agent) in seen:
            return seen[id(agent)]
        tools = [guard_tool(t, self) if isinstance(t, FunctionTool) else t for t in agent.tools]
        clone = agent.clone(tools=tools)
        seen[id(agent)] = clone
        if agent.handoffs:
            clone.handoffs = [self.protect(h, seen) if isinstance(h, Agent) else h for h in agent.handoffs]
        return clone

    async def run(self, agent: Agent[Any], input: str, **kwargs: Any) -> Any:  # noqa: A002
        """`Runner.run` under Hookbox: `run-start` may replace the prompt
        (`replace-user-content`) or skip the run (`HookboxSkipRun`), and the
        result's `final_output` is the answer after `replace-content`."""
        self._reset()
        if self.send_run_start and isinstance(input, str):
            model = agent.model if isinstance(agent.model, str) else getattr(agent.model, "model", "") or ""
            input = await self.client.arun_start(input, model=str(model), provider="openai-agents")  # noqa: A001
            self._started = True
        result = await Runner.run(self.protect(agent), input, hooks=self, **kwargs)
        if self.final_output is not None and isinstance(result.final_output, str):
            result.final_output = self.final_output
        return result

    def _reset(self) -> None:
        self.iteration = 0
        self.final_output = None
        self._started = False

    # -- RunHooks --------------------------------------------------------------

    async def on_agent_start(self, context: Any, agent: Any) -> None:
        if self._started or not self.send_run_start:
            self._started = True
            return
        self.iteration = 0
        self.final_output = None
        self._started = True
        prompt = ""
        turn_input = getattr(context, "turn_input", None) or []
        for item in turn_input:
            if isinstance(item, dict) and item.get("role") == "user":
                content = item.get("content")
                prompt = content if isinstance(content, str) else text_of(content)
        model = agent.model if isinstance(agent.model, str) else getattr(agent.model, "model", "") or ""
        # A replaced prompt cannot be applied from here (use `run`); a skip-run or abort raises.
        await self.client.arun_start(prompt, model=str(model), provider="openai-agents")

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        # One iteration is one tool roundtrip: a response that asks for
        # tools opens the next one (docs/contract.md, "Firing order").
        if any(getattr(item, "type", None) == "function_call" for item in getattr(response, "output", []) or []):
            self.iteration += 1

    async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
        self._started = False
        if not self.send_final_answer:
            return
        text = text_of(output)
        u = getattr(context, "usage", None)
        answer = await self.client.afinal_answer(
            text, input_tokens=getattr(u, "input_tokens", 0), output_tokens=getattr(u, "output_tokens", 0)
        )
        self.final_output = answer if answer != text else None
