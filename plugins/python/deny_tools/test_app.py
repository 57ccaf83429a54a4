"""The hook itself (app.py), natively, as a 0.2.0 host calls it (event and
context) and as a 0.1.0 host does (the event alone): the same directives
(``PYTHONPATH=../../../guest-sdk/python python3 -m unittest`` in this folder)."""

import importlib
import sys
import unittest

from hookbox_sdk import testing

CONFIG = {"paths": [".env", "*.pem"], "tools": "shell", "surprise": "1"}
DENIED = "deny-tools: `delete_file` on `.env` is denied (pattern `.env`)"


class App(unittest.TestCase):
    def run_calls(self, version):
        """Three calls to a fresh instance under ``version``; their directives and the host's log."""
        with testing.world(version, config=CONFIG) as w:
            # Imported afresh (one hook instance per import, as per component instance), inside
            # a world: app binds CONTINUE at import.
            sys.modules.pop("app", None)
            app = importlib.import_module("app")
            on_event = app.WitWorld().on_event
            extra = () if version == "0.1.0" else (w.context(turn=2),)
            start = w.types.Event_IterationStart(w.types.IterationStart(iteration=1, loop_counter=1))
            got = [
                on_event(start, *extra),
                on_event(w.before_tool_call("delete_file", '{"path": ".env"}'), *extra),
                on_event(w.before_tool_call("create_file", '{"path": "test.txt"}', call_id="call_2"), *extra),
                on_event(w.before_tool_call("shell", "not json", call_id="call_3"), *extra),
            ]
            return w.types, got, w.host.logs

    def test_declines_the_same_calls_under_both_contract_versions(self):
        for version in ("0.2.0", "0.1.0"):
            with self.subTest(version=version):
                t, got, logs = self.run_calls(version)
                self.assertEqual(
                    got,
                    [
                        t.Directive_Continue(),
                        t.Directive_SkipTool(DENIED),
                        t.Directive_Continue(),
                        t.Directive_SkipTool("deny-tools: tool `shell` is denied"),
                    ],
                )
                self.assertEqual(logs[0], ("warn", "deny-tools: unknown config key `surprise` ignored"))
                self.assertEqual(logs[1][0], "warn")
                self.assertIn("arguments of `shell` (call call_3) are not valid JSON", logs[1][1])
                self.assertEqual(len(logs), 2, logs)


if __name__ == "__main__":
    unittest.main()
