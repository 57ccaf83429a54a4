//! `trap-on-tool`: a Hookbox test fixture that panics at `before-tool-call`,
//! so the component traps and the host must record a hook failure (and
//! fail open, or skip the tool when the plugin is configured fail-closed).
//! Every other event continues. It reads no config.

use hookbox_sdk::{Directive, Hook, ToolCallEvent, export_hook};

struct TrapOnTool;

impl Hook for TrapOnTool {
    fn new() -> Self {
        TrapOnTool
    }

    fn before_tool_call(&mut self, event: &ToolCallEvent) -> Directive {
        panic!("trap-on-tool: deliberate panic at before-tool-call for {}", event.call.name)
    }
}

export_hook!(TrapOnTool);
