"""The client alone, against the real server."""

from __future__ import annotations

import socket

import pytest

from hookbox_adapters import HookboxClient, HookboxUnavailable


def test_a_decision_of_the_chain(hookbox):
    client = hookbox.client("deny-tools", "rewrite")
    verdict = client.before_tool_call(1, "c1", "delete_file", '{"path": ".env"}')
    assert not verdict.run and "is denied" in verdict.message
    assert verdict.decision.plugin == "deny-tools"
    verdict = client.before_tool_call(1, "c2", "read_file", '{"path": "a.txt"}')
    assert verdict.run and verdict.arguments == '{"path": "safe.txt"}'


def test_a_bad_event_is_an_error_not_a_continue(hookbox):
    client = hookbox.client("deny-tools")
    with pytest.raises(HookboxUnavailable) as e:
        client.before_tool_call(1, "c1", "delete_file", "[1]")  # arguments must be a JSON object
    assert e.value.status == 400


def test_an_unreachable_server_fails_closed_unless_told_otherwise():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(HookboxUnavailable):
        HookboxClient(url, "hbk_x", timeout=2).before_tool_call(1, "c", "delete_file", "{}")
    verdict = HookboxClient(url, "hbk_x", timeout=2, fail_open=True).before_tool_call(1, "c", "delete_file", "{}")
    assert verdict.run


def test_a_wrong_key_is_refused(hookbox):
    with pytest.raises(HookboxUnavailable) as e:
        HookboxClient(hookbox.url, "hbk_" + "0" * 64).before_tool_call(1, "c", "x", "{}")
    assert e.value.status == 401
