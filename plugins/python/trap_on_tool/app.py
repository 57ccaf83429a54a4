"""trap-on-tool in Python (test fixture): raises at ``before-tool-call``
("trap-on-tool: deliberate exception at before-tool-call for TOOL"), so the
component traps; continues at every other event. The Python twin of
plugins/trap-on-tool, to prove a Python failure is contained like a Rust one.
"""

from hookbox_sdk import Hook, export


class TrapOnTool(Hook):
    def before_tool_call(self, event):
        raise RuntimeError(f"trap-on-tool: deliberate exception at before-tool-call for {event.call.name}")


WitWorld = export(TrapOnTool)
