"""Hookbox adapters: run Hookbox's WASM policies from Python agent SDKs.

`HookboxClient` talks to `hookbox serve`'s `POST /v1/evaluate`;
`hookbox_adapters.openai_agents` and `hookbox_adapters.pydantic_ai` plug it
into the OpenAI Agents SDK and Pydantic AI.
"""

from .client import (
    DEFAULT_DECLINE_MESSAGE,
    Decision,
    HookboxAborted,
    HookboxClient,
    HookboxError,
    HookboxRejected,
    HookboxSkipRun,
    HookboxStop,
    HookboxUnavailable,
    ToolVerdict,
)

__all__ = [
    "DEFAULT_DECLINE_MESSAGE",
    "Decision",
    "HookboxAborted",
    "HookboxClient",
    "HookboxError",
    "HookboxRejected",
    "HookboxSkipRun",
    "HookboxStop",
    "HookboxUnavailable",
    "ToolVerdict",
]
