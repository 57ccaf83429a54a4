"""The Python SDK against both contract versions, natively (hookbox_sdk.testing
stands in for componentize-py's generated modules): hookbox:hooks@0.2.0's
directives and event context, and a 0.1.0 build's fallback (no context, no
0.2.0 directives)."""

import unittest

import hookbox_sdk
from hookbox_sdk import (
    CONTINUE,
    Hook,
    ask_approval,
    event_iteration,
    event_name,
    export,
    post_message,
    skip_model_call,
    skip_tool,
    testing,
)


class Recorder(Hook):
    """Records what each call saw; declines every tool, naming the turn."""

    #: Every instance, newest last (export() creates them out of reach).
    instances = []

    def __init__(self):
        self.seen = []
        Recorder.instances.append(self)

    def on_event(self, event, context=None):
        self.seen.append(("on_event", event_name(event), context))
        return super().on_event(event, context)

    def before_tool_call(self, event):
        self.seen.append(("before_tool_call", event.call.name, self.context))
        turn = self.context.turn if self.context is not None else "none"
        return skip_tool(f"turn {turn}")


class OldStyle(Hook):
    """An ``on_event`` override written before 0.2.0: the event alone."""

    def on_event(self, event):
        return skip_tool(f"context {self.context}")


class Directives(unittest.TestCase):
    def test_the_0_2_0_directives(self):
        with testing.world("0.2.0") as w:
            t = w.types
            self.assertEqual(hookbox_sdk.WIT_VERSION, "0.2.0")
            self.assertEqual(ask_approval("shell needs a human"), t.Directive_AskApproval("shell needs a human"))
            self.assertEqual(skip_model_call("cached"), t.Directive_SkipModelCall("cached"))
            self.assertEqual(post_message("reviewer", "done"), t.Directive_PostMessage(t.Post("reviewer", "done")))
            self.assertEqual(post_message("reviewer", "done").value.to, "reviewer")
            self.assertEqual(skip_tool("no"), t.Directive_SkipTool("no"))
            self.assertEqual(hookbox_sdk.CONTINUE, t.Directive_Continue())

    def test_a_0_1_0_build_refuses_them_clearly_and_keeps_the_rest(self):
        with testing.world("0.1.0") as w:
            self.assertEqual(hookbox_sdk.WIT_VERSION, "0.1.0")
            for make in (lambda: ask_approval("r"), lambda: skip_model_call("r"), lambda: post_message("s", "t")):
                with self.assertRaisesRegex(
                    RuntimeError, r"needs hookbox:hooks@0\.2\.0; this hook is built against hookbox:hooks@0\.1\.0"
                ):
                    make()
            self.assertEqual(skip_tool("no"), w.types.Directive_SkipTool("no"))
            self.assertFalse(hasattr(w.types, "EventContext"))

    def test_outside_a_component(self):
        self.assertIsNone(hookbox_sdk.WIT_VERSION)
        self.assertIsNone(CONTINUE)
        with self.assertRaisesRegex(RuntimeError, "outside a component"):
            ask_approval("r")


class Context(unittest.TestCase):
    def test_a_0_2_0_host_passes_the_context_to_on_event_and_the_methods(self):
        with testing.world("0.2.0") as w:
            world = export(Recorder)()
            first, second = w.context(turn=3, iteration=1), w.context(turn=3, iteration=2, retries=1)
            self.assertEqual(world.on_event(w.before_tool_call("shell"), first), w.types.Directive_SkipTool("turn 3"))
            start = w.types.Event_IterationStart(w.types.IterationStart(iteration=2, loop_counter=1))
            self.assertEqual(world.on_event(start, second), w.types.Directive_Continue())
            self.assertEqual(event_iteration(start), 2)
            # One instance served both calls, each with its own context.
            seen = Recorder.instances[-1].seen
            self.assertEqual(
                [s[:2] for s in seen],
                [("on_event", "before-tool-call"), ("before_tool_call", "shell"), ("on_event", "iteration-start")],
            )
            self.assertEqual([s[2] for s in seen], [first, first, second])

    def test_a_0_1_0_host_calls_with_the_event_alone(self):
        with testing.world("0.1.0") as w:
            world = export(Recorder)()
            self.assertIsNone(w.context())
            self.assertEqual(world.on_event(w.before_tool_call("shell")), w.types.Directive_SkipTool("turn none"))
            self.assertEqual([s[2] for s in Recorder.instances[-1].seen], [None, None])

    def test_an_override_taking_the_event_alone_still_works(self):
        with testing.world("0.2.0") as w:
            ctx = w.context(turn=7)
            directive = export(OldStyle)().on_event(w.before_tool_call("x"), ctx)
            self.assertEqual(directive, w.types.Directive_SkipTool(f"context {ctx}"))
        with testing.world("0.1.0") as w:
            directive = export(OldStyle)().on_event(w.before_tool_call("x"))
            self.assertEqual(directive, w.types.Directive_SkipTool("context None"))

    def test_returning_none_is_logged_and_raised(self):
        class Silent(Hook):
            def before_tool_call(self, event):
                return None

        with testing.world("0.2.0") as w:
            with self.assertRaises(TypeError):
                export(Silent)().on_event(w.before_tool_call("x"), w.context())
            self.assertEqual(w.host.logs[0][0], "error")
            self.assertIn("Silent.on_event returned None", w.host.logs[0][1])


if __name__ == "__main__":
    unittest.main()
