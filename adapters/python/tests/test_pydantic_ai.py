"""Pydantic AI under a real `hookbox serve`, against a scripted model."""

from __future__ import annotations

import json

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from hookbox_adapters import HookboxAborted, HookboxRejected, HookboxSkipRun
from hookbox_adapters.pydantic_ai import HookboxCapability


def make_agent(fake_model, files, client):
    model = OpenAIChatModel("fake", provider=OpenAIProvider(base_url=fake_model.base_url, api_key="test"))
    agent = Agent(model, instructions="Be useful.", capabilities=[HookboxCapability(client)])

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a file of the workspace."""
        return files.read_file(path)

    @agent.tool_plain
    def delete_file(path: str) -> str:
        """Delete a file of the workspace."""
        return files.delete_file(path)

    return agent


def test_a_denied_call_is_not_run_and_the_model_gets_the_reason(hookbox, fake_model, files):
    fake_model.script = [("tool", "delete_file", {"path": ".env"}), ("text", "I could not delete it.")]
    client = hookbox.client("deny-tools")
    result = make_agent(fake_model, files, client).run_sync("Delete the file .env")
    assert result.output == "I could not delete it."
    assert files.calls == [], "the denied tool ran"
    [tool_message] = fake_model.tool_messages(1)
    assert "deny-tools: `delete_file` on `.env` is denied" in tool_message["content"], tool_message
    events = [e["type"] for e, _ in client.history]
    assert events == ["run-start", "before-tool-call", "tool-call-result", "final-answer"], events
    assert client.history[0][0]["user_content"] == [{"type": "text", "text": "Delete the file .env"}]
    before = client.history[1][0]
    assert before["iteration"] == 1
    assert json.loads(before["call"]["arguments"]) == {"path": ".env"}
    assert client.history[2][0]["success"] is False


def test_an_allowed_call_runs(hookbox, fake_model, files):
    fake_model.script = [("tool", "delete_file", {"path": "a.txt"}), ("text", "deleted")]
    client = hookbox.client("deny-tools")
    result = make_agent(fake_model, files, client).run_sync("Delete a.txt")
    assert result.output == "deleted"
    assert files.calls == [("delete_file", "a.txt")]
    assert fake_model.tool_messages(1)[0]["content"] == "deleted a.txt"
    assert client.history[2][0]["success"] is True


def test_replaced_arguments_run_and_replaced_result_is_what_the_model_sees(hookbox, fake_model, files):
    fake_model.script = [("tool", "read_file", {"path": "a.txt"}), ("text", "read it")]
    client = hookbox.client("deny-tools", "rewrite")
    result = make_agent(fake_model, files, client).run_sync("Read a.txt")
    assert result.output == "read it"
    assert files.calls == [("read_file", "safe.txt")], "the tool did not run with the rewritten arguments"
    [tool_message] = fake_model.tool_messages(1)
    assert tool_message["content"] == 'REDACTED (ran with {"path": "safe.txt"})', tool_message
    assert "secret" not in json.dumps(fake_model.requests)
    # The history shows the arguments that ran.
    [call] = [c for m in fake_model.requests[1]["messages"] for c in m.get("tool_calls") or []]
    assert json.loads(call["function"]["arguments"]) == {"path": "safe.txt"}


def test_abort_stops_the_run_with_an_exception(hookbox, fake_model, files):
    fake_model.script = [("tool", "read_file", {"path": "a.txt"}), ("text", "never")]
    client = hookbox.client("aborter")
    with pytest.raises(HookboxAborted) as e:
        make_agent(fake_model, files, client).run_sync("Read a.txt")
    assert e.value.reason == "stop now"
    assert e.value.plugin == "aborter"
    assert files.calls == []
    assert len(fake_model.requests) == 1, "the model was asked again after the abort"


def test_reject_at_the_final_answer_raises(hookbox, fake_model, files):
    fake_model.script = [("text", "here is the secret")]
    with pytest.raises(HookboxRejected) as e:
        make_agent(fake_model, files, hookbox.client("rejecter")).run_sync("Tell me")
    assert e.value.reason == "no answers today"
    assert e.value.event == "final-answer"


def test_replaced_content_is_the_answer(hookbox, fake_model, files):
    fake_model.script = [("text", "the model's answer")]
    result = make_agent(fake_model, files, hookbox.client("answer-rewriter")).run_sync("Tell me")
    assert result.output == "the answer, as the policy wants it"


def test_skip_run_makes_no_model_request(hookbox, fake_model, files):
    with pytest.raises(HookboxSkipRun) as e:
        make_agent(fake_model, files, hookbox.client("skipper")).run_sync("Tell me")
    assert e.value.reason == "not today"
    assert fake_model.requests == []


def test_one_capability_serves_a_session_of_runs(hookbox, fake_model, files):
    client = hookbox.client("deny-tools")
    agent = make_agent(fake_model, files, client)
    for _ in range(2):
        fake_model.script = [("tool", "delete_file", {"path": ".env"}), ("text", "no")]
        assert agent.run_sync("Delete .env").output == "no"
    assert files.calls == []
    befores = [e for e, _ in client.history if e["type"] == "before-tool-call"]
    assert [e["iteration"] for e in befores] == [1, 1], "the iteration count leaked between runs"
