"""The OpenAI Agents SDK under a real `hookbox serve`, against a scripted model."""

from __future__ import annotations

import asyncio
import json

import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from hookbox_adapters import HookboxAborted, HookboxRejected, HookboxSkipRun
from hookbox_adapters.openai_agents import HookboxRunHooks

set_tracing_disabled(True)


def make_agent(fake_model, files):
    @function_tool
    def read_file(path: str) -> str:
        """Read a file of the workspace."""
        return files.read_file(path)

    @function_tool
    def delete_file(path: str) -> str:
        """Delete a file of the workspace."""
        return files.delete_file(path)

    model = OpenAIChatCompletionsModel(
        model="fake", openai_client=AsyncOpenAI(base_url=fake_model.base_url, api_key="test", max_retries=0)
    )
    return Agent(name="assistant", instructions="Be useful.", model=model, tools=[read_file, delete_file])


def run(coro):
    return asyncio.run(coro)


def test_a_denied_call_is_not_run_and_the_model_gets_the_reason(hookbox, fake_model, files):
    fake_model.script = [("tool", "delete_file", {"path": ".env"}), ("text", "I could not delete it.")]
    client = hookbox.client("deny-tools")
    hooks = HookboxRunHooks(client)
    result = run(hooks.run(make_agent(fake_model, files), "Delete the file .env"))
    assert result.final_output == "I could not delete it."
    assert files.calls == [], "the denied tool ran"
    [tool_message] = fake_model.tool_messages(1)
    assert "deny-tools: `delete_file` on `.env` is denied" in tool_message["content"], tool_message
    events = [e["type"] for e, _ in client.history]
    assert events == ["run-start", "before-tool-call", "tool-call-result", "final-answer"], events
    before = client.history[1][0]
    assert before["iteration"] == 1
    assert json.loads(before["call"]["arguments"]) == {"path": ".env"}
    assert client.history[1][1].verdict == "skip-tool"
    assert client.history[2][0]["success"] is False


def test_same_with_plain_runner_and_hooks(hookbox, fake_model, files):
    fake_model.script = [("tool", "delete_file", {"path": ".env"}), ("text", "done")]
    client = hookbox.client("deny-tools")
    hooks = HookboxRunHooks(client)
    agent = hooks.protect(make_agent(fake_model, files))
    result = run(Runner.run(agent, "Delete the file .env", hooks=hooks))
    assert result.final_output == "done"
    assert files.calls == []
    assert [e["type"] for e, _ in client.history][0] == "run-start"
    assert client.history[0][0]["user_content"] == [{"type": "text", "text": "Delete the file .env"}]


def test_an_allowed_call_runs(hookbox, fake_model, files):
    fake_model.script = [("tool", "delete_file", {"path": "a.txt"}), ("text", "deleted")]
    client = hookbox.client("deny-tools")
    result = run(HookboxRunHooks(client).run(make_agent(fake_model, files), "Delete a.txt"))
    assert result.final_output == "deleted"
    assert files.calls == [("delete_file", "a.txt")]
    assert fake_model.tool_messages(1)[0]["content"] == "deleted a.txt"


def test_replaced_arguments_run_and_replaced_result_is_what_the_model_sees(hookbox, fake_model, files):
    fake_model.script = [("tool", "read_file", {"path": "a.txt"}), ("text", "read it")]
    client = hookbox.client("deny-tools", "rewrite")
    result = run(HookboxRunHooks(client).run(make_agent(fake_model, files), "Read a.txt"))
    assert result.final_output == "read it"
    assert files.calls == [("read_file", "safe.txt")], "the tool did not run with the rewritten arguments"
    [tool_message] = fake_model.tool_messages(1)
    assert tool_message["content"] == 'REDACTED (ran with {"path": "safe.txt"})', tool_message
    assert "secret" not in json.dumps(fake_model.requests)


def test_abort_stops_the_run_with_an_exception(hookbox, fake_model, files):
    fake_model.script = [("tool", "read_file", {"path": "a.txt"}), ("text", "never")]
    client = hookbox.client("aborter")
    with pytest.raises(HookboxAborted) as e:
        run(HookboxRunHooks(client).run(make_agent(fake_model, files), "Read a.txt"))
    assert e.value.reason == "stop now"
    assert e.value.plugin == "aborter"
    assert e.value.event == "before-tool-call"
    assert files.calls == []
    assert len(fake_model.requests) == 1, "the model was asked again after the abort"


def test_reject_at_the_final_answer_raises(hookbox, fake_model, files):
    fake_model.script = [("text", "here is the secret")]
    client = hookbox.client("rejecter")
    hooks = HookboxRunHooks(client)
    with pytest.raises(HookboxRejected) as e:
        run(Runner.run(hooks.protect(make_agent(fake_model, files)), "Tell me", hooks=hooks))
    assert e.value.reason == "no answers today"
    assert e.value.event == "final-answer"


def test_replaced_content_is_the_answer(hookbox, fake_model, files):
    fake_model.script = [("text", "the model's answer")]
    client = hookbox.client("answer-rewriter")
    result = run(HookboxRunHooks(client).run(make_agent(fake_model, files), "Tell me"))
    assert result.final_output == "the answer, as the policy wants it"


def test_skip_run_makes_no_model_request(hookbox, fake_model, files):
    client = hookbox.client("skipper")
    with pytest.raises(HookboxSkipRun) as e:
        run(HookboxRunHooks(client).run(make_agent(fake_model, files), "Tell me"))
    assert e.value.reason == "not today"
    assert fake_model.requests == []


def test_ask_approval_asks_the_approver(hookbox, fake_model, files):
    asked = []

    def approver(tool, arguments, reasons):
        asked.append((tool, json.loads(arguments), reasons))
        return {"path": "safe.txt"}  # approved, with other arguments

    fake_model.script = [("tool", "read_file", {"path": "a.txt"}), ("text", "ok")]
    client = hookbox.client("asker", approver=approver)
    result = run(HookboxRunHooks(client).run(make_agent(fake_model, files), "Read a.txt"))
    assert result.final_output == "ok"
    assert asked[0] == ("read_file", {"path": "a.txt"}, ["read_file needs a person"])
    assert files.calls == [("read_file", "safe.txt")]
    # Without an approver the call is declined.
    fake_model.script = [("tool", "read_file", {"path": "a.txt"}), ("text", "ok")]
    files.calls.clear()
    run(HookboxRunHooks(hookbox.client("asker")).run(make_agent(fake_model, files), "Read a.txt"))
    assert files.calls == []
    assert "needs a person" in fake_model.tool_messages(-1)[0]["content"]
