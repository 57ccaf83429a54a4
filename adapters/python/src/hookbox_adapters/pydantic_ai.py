"""Hookbox for Pydantic AI: a capability (`pydantic_ai.capabilities`) that
sends the run's events to `POST /v1/evaluate` and does what the answer says.

    from hookbox_adapters import HookboxClient
    from hookbox_adapters.pydantic_ai import HookboxCapability

    hookbox = HookboxClient("http://127.0.0.1:8787", key, session_id="chat-42")
    agent = Agent(model, tools=[...], capabilities=[HookboxCapability(hookbox)])

Events: `run-start` (`before_run`; skip-run/abort raise), `before-tool-call`
(`before_tool_validate`, with the model's raw arguments: a declined call is
not run and the model gets the reason as a failed tool result; rewritten
arguments are validated and run, and shown in the history), `tool-call-result`
(`after_tool_execute` / `on_tool_execute_error`: `replace-result` is what the
model sees), `final-answer` (`after_run`: `replace-content` replaces a text
output; reject/abort raise).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ToolFailed

from .client import HookboxClient, arguments_text, text_of

__all__ = ["HookboxCapability"]


@dataclass
class HookboxCapability(AbstractCapability[Any]):
    """Puts an agent's tool calls and answers under the tenant's Hookbox
    chain. One instance may serve many runs: each run gets its own copy
    (`for_run`), and all of them share `client`'s session."""

    client: HookboxClient
    send_run_start: bool = True
    send_final_answer: bool = True
    _iteration: int = field(default=0, repr=False)
    _arguments: dict[str, str] = field(default_factory=dict, repr=False)
    _started: dict[str, float] = field(default_factory=dict, repr=False)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a live client

    async def for_run(self, ctx: Any) -> "HookboxCapability":
        return replace(self, _iteration=0, _arguments={}, _started={})

    # -- run-start / final-answer ------------------------------------------

    async def before_run(self, ctx: Any) -> None:
        if not self.send_run_start:
            return
        prompt = ctx.prompt if isinstance(ctx.prompt, str) else text_of(ctx.prompt) if ctx.prompt else ""
        model = getattr(ctx.model, "model_name", "") or ""
        provider = getattr(ctx.model, "system", "") or ""
        await self.client.arun_start(prompt, model=str(model), provider=str(provider), run_id=ctx.run_id)

    async def after_run(self, ctx: Any, *, result: Any) -> Any:
        if not self.send_final_answer:
            return result
        output = result.output
        text = text_of(output)
        u = ctx.usage
        answer = await self.client.afinal_answer(
            text, input_tokens=getattr(u, "input_tokens", 0), output_tokens=getattr(u, "output_tokens", 0)
        )
        if answer != text and isinstance(output, str):
            result.output = answer
        return result

    # -- iterations ----------------------------------------------------------

    async def after_model_request(self, ctx: Any, *, request_context: Any, response: Any) -> Any:
        # One iteration is one tool roundtrip: a response that asks for
        # tools opens the next one (docs/contract.md, "Firing order").
        if response.tool_calls:
            self._iteration += 1
        return response

    # -- tools ---------------------------------------------------------------

    async def before_tool_validate(self, ctx: Any, *, call: Any, tool_def: Any, args: Any) -> Any:
        arguments = arguments_text(args)
        iteration = max(self._iteration, 1)
        verdict = await self.client.abefore_tool_call(iteration, call.tool_call_id, call.tool_name, arguments)
        if not verdict.run:
            message = verdict.message or ""
            replaced = await self.client.atool_call_result(
                iteration, call.tool_call_id, call.tool_name, verdict.arguments, message, success=False
            )
            raise ToolFailed(replaced if replaced is not None else message)
        self._arguments[call.tool_call_id] = verdict.arguments
        self._started[call.tool_call_id] = time.monotonic()
        if verdict.arguments != arguments:
            new_args = json.loads(verdict.arguments)
            # The history shows the arguments that ran (docs/contract.md,
            # `replace-arguments`); the provider's item id would replay the
            # model's own copy, so it goes.
            call.args = new_args
            if getattr(call, "id", None) is not None:
                call.id = None
            return new_args
        return args

    def _duration(self, call_id: str) -> int:
        started = self._started.pop(call_id, None)
        return int((time.monotonic() - started) * 1000) if started is not None else 0

    async def after_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any, result: Any) -> Any:
        arguments = self._arguments.pop(call.tool_call_id, arguments_text(args))
        replaced = await self.client.atool_call_result(
            max(self._iteration, 1), call.tool_call_id, call.tool_name, arguments, text_of(result),
            success=True, duration_ms=self._duration(call.tool_call_id),
        )
        return replaced if replaced is not None else result

    async def on_tool_execute_error(self, ctx: Any, *, call: Any, tool_def: Any, args: Any, error: Exception) -> Any:
        arguments = self._arguments.pop(call.tool_call_id, arguments_text(args))
        replaced = await self.client.atool_call_result(
            max(self._iteration, 1), call.tool_call_id, call.tool_name, arguments, f"{type(error).__name__}: {error}",
            success=False, duration_ms=self._duration(call.tool_call_id),
        )
        if replaced is not None:
            return replaced
        raise error
