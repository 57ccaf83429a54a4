"""Run a hook outside a component (``python3 -m unittest``): stand-ins for
the modules componentize-py generates from the WIT (``wit_world.imports.types``
and ``wit_world.imports.host``), for either contract version::

    import unittest
    from hookbox_sdk import testing

    class NoRmTest(unittest.TestCase):
        def test_declines_rm(self):
            with testing.world("0.2.0", config={"tools": "rm"}) as w:
                import app  # import the hook module inside a world: CONTINUE is bound then
                on_event = app.WitWorld().on_event
                directive = on_event(w.before_tool_call("rm", "{}"), w.context(turn=2))
                self.assertEqual(directive, w.types.Directive_SkipTool("no rm"))
                self.assertEqual(w.host.logs, [])

Inside ``world(version)`` the SDK's helpers build the stand-in dataclasses
(``types.Directive_*``, ``types.Event_*``, the event records, and with
0.2.0 ``types.EventContext`` and ``types.Post``), ``hookbox_sdk.WIT_VERSION``
is ``version``, and ``config``, ``state``, ``log`` and ``journaled`` use an
in-memory :class:`Host`. In the 0.1.0 world the 0.2.0 classes are missing, as
in a component built against ``wit/frozen/hookbox-hooks@0.1.0``; a 0.1.0
host calls ``on_event(event)`` with no context. The classes are shared by
both worlds (a ``CONTINUE`` from one equals the other's), and every record
field defaults to ``None``.
"""

import contextlib
import dataclasses
import enum
import json
import types as _pytypes

import hookbox_sdk as _sdk

_RECORDS = {
    "Usage": "input_tokens output_tokens cache_read_tokens cache_write_tokens cost_usd",
    "ToolCall": "id name arguments",
    "RunStart": "run_id session_id model provider user_content",
    "IterationStart": "iteration loop_counter",
    "RequestStart": "request_index iteration attempt purpose model provider",
    "ModelResponse": "iteration text content tool_calls reasoning finish_reason usage",
    "ToolCallEvent": "iteration call",
    "ToolCallResult": "iteration tool_name tool_call_id result truncated success duration_ms reported_cost"
    " cost_estimated arguments result_data",
    "IterationComplete": "iteration usage tools_called stop_reason",
    "FinalAnswer": "text content finish_reason usage tool_calls reasoning",
    "RunEnd": "iterations usage error",
    "EventContext": "run_id session_id turn iteration max_iterations retries",
    "Post": "to text",
}
_DIRECTIVES_0_1_0 = (
    "Continue SkipTool ReplaceArguments ReplaceResult ReplaceContent ReplaceUserContent"
    " InjectMessage Retry Reject SkipRun Pause Abort"
).split()
_DIRECTIVES_0_2_0 = ["AskApproval", "SkipModelCall", "PostMessage"]
_ONLY_0_2_0 = {"EventContext", "Post"} | {"Directive_" + d for d in _DIRECTIVES_0_2_0}


def _classes():
    out = {}
    for name, fields in _RECORDS.items():
        out[name] = dataclasses.make_dataclass(name, [(f, object, None) for f in fields.split()])
    for d in _DIRECTIVES_0_1_0 + _DIRECTIVES_0_2_0:
        fields = [] if d in ("Continue", "Pause") else [("value", object)]
        out["Directive_" + d] = dataclasses.make_dataclass("Directive_" + d, fields)
    for name in _sdk.EVENT_NAMES:
        variant = "Event_" + "".join(p.capitalize() for p in name.split("-"))
        out[variant] = dataclasses.make_dataclass(variant, [("value", object)])
    out["ContentBlock_Text"] = dataclasses.make_dataclass("ContentBlock_Text", [("value", object)])
    return out


_CLASSES = _classes()


def types_module(version):
    """A stand-in for the generated ``types`` module of ``hookbox:hooks@version``."""
    if version not in ("0.1.0", "0.2.0"):
        raise ValueError(f"unknown hookbox:hooks version {version!r}")
    module = _pytypes.ModuleType(f"hookbox_sdk.testing.types_{version.replace('.', '_')}")
    for name, cls in _CLASSES.items():
        if version == "0.2.0" or name not in _ONLY_0_2_0:
            setattr(module, name, cls)
    return module


class Host:
    """The host's imports in memory: ``config`` (values as the manifest would
    give them: strings as they are, anything else as JSON text), ``logs``
    (``(level, message)`` pairs, level in lower case), the saved state, and
    the draws of ``random`` (a callable, default a fixed counter)."""

    class LogLevel(enum.Enum):
        """The generated ``LogLevel``."""

        TRACE = 0
        DEBUG = 1
        INFO = 2
        WARN = 3
        ERROR = 4

    def __init__(self, config=None):
        self.config = {k: v if isinstance(v, str) else json.dumps(v) for k, v in (config or {}).items()}
        self.logs = []
        self.saved = None
        self.now_ms = 1_700_000_000_000
        self._count = 0

    def log(self, level, message):
        """Keeps ``(level, message)``."""
        self.logs.append((level.name.lower(), message))

    def get_config(self, key):
        """The configured value of ``key``, or ``None``."""
        return self.config.get(key)

    def config_keys(self):
        """The configured keys, sorted."""
        return sorted(self.config)

    def get_state(self):
        """What ``set_state`` saved last (``.version``, ``.data``), or ``None``."""
        return self.saved

    def set_state(self, data):
        """Saves ``data`` as version ``test``."""
        self.saved = _pytypes.SimpleNamespace(version="test", data=bytes(data))

    def now(self):
        """``now_ms`` as the generated ``Datetime``."""
        return _pytypes.SimpleNamespace(seconds=self.now_ms // 1000, nanoseconds=self.now_ms % 1000 * 1_000_000)

    def random(self):
        """1, 2, 3, ... (``journaled._draw`` replaces it)."""
        self._count += 1
        return self._count

    def uuid(self):
        """A fixed UUID."""
        return "00000000-0000-4000-8000-000000000000"

    def sleep(self, ms):
        """Returns at once."""


class World:
    """What :func:`world` yields: the ``types`` stand-in, the :class:`Host`,
    and builders for the values a host passes."""

    def __init__(self, version, host):
        self.version = version
        self.types = types_module(version)
        self.host = host

    def context(self, **fields):
        """An ``EventContext`` (``run-1`` for both ids, turn 1, iteration 1,
        max_iterations 10, retries 0, unless given); ``None`` in the 0.1.0 world."""
        if self.version == "0.1.0":
            return None
        values = dict(run_id="run-1", session_id="run-1", turn=1, iteration=1, max_iterations=10, retries=0)
        values.update(fields)
        return self.types.EventContext(**values)

    def before_tool_call(self, name, arguments="{}", call_id="call_1", iteration=1):
        """A ``before-tool-call`` event for the tool ``name``."""
        call = self.types.ToolCall(id=call_id, name=name, arguments=arguments)
        return self.types.Event_BeforeToolCall(self.types.ToolCallEvent(iteration=iteration, call=call))


@contextlib.contextmanager
def world(version="0.2.0", config=None):
    """Binds the SDK to the stand-ins of ``version`` and a fresh :class:`Host`
    with ``config`` for the ``with`` block; yields the :class:`World`."""
    w = World(version, Host(config))
    saved = (_sdk.types, _sdk._host, _sdk.CONTINUE, _sdk.WIT_VERSION)
    _sdk.types, _sdk._host = w.types, w.host
    _sdk.CONTINUE, _sdk.WIT_VERSION = w.types.Directive_Continue(), _sdk._wit_version(w.types)
    try:
        yield w
    finally:
        _sdk.types, _sdk._host, _sdk.CONTINUE, _sdk.WIT_VERSION = saved
