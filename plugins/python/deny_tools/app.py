"""deny-tools in Python: the same hook as plugins/deny-tools (Rust), built
with componentize-py. At ``before-tool-call`` it answers ``skip-tool`` for a
denied tool name or a path argument matching a ``paths`` glob, with the same
reason text; every other event continues. Config: ``tools``, ``paths``,
``path_keys``, ``message`` (see policy.py and plugins/README.md).

An invalid config raises at the first ``before-tool-call`` (a ``trap``
failure), as the Rust plugin panics.

It reads no event context, so the same source builds against
hookbox:hooks@0.2.0 (``python_deny_tools.wasm``) and the frozen 0.1.0
(``python_deny_tools_v0_1_0.wasm``); test_app.py runs it both ways natively.
"""

from hookbox_sdk import CONTINUE, Hook, args, config, export, log, skip_tool
from policy import CONFIG_KEYS, Policy


class DenyTools(Hook):
    def __init__(self):
        self.policy = None

    def before_tool_call(self, event):
        if self.policy is None:
            for key in config.keys():
                if key not in CONFIG_KEYS:
                    log.warn(f"deny-tools: unknown config key `{key}` ignored")
            self.policy = Policy(config.get)
        call = event.call
        try:
            arguments = args(call)
        except ValueError as e:
            log.warn(
                f"deny-tools: arguments of `{call.name}` (call {call.id}) are not valid JSON, path rules skipped: {e}"
            )
            arguments = None
        reason = self.policy.check(call.name, arguments)
        return CONTINUE if reason is None else skip_tool(reason)


WitWorld = export(DenyTools)
