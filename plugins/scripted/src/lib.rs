//! `scripted`: a Hookbox test fixture that returns, for each event, the
//! directive its config names. Each config key is an event's kebab-case name
//! (`run-start`, `before-tool-call`, ...) and its value a directive spec:
//! `continue`, `skip-tool`, `skip-tool:MSG`, `inject-message:TEXT`, `abort`,
//! `abort:REASON`, `pause`, `retry:TEXT`, `reject:TEXT`, `skip-run:TEXT`,
//! `replace-arguments:JSON`, `replace-result:TEXT`, `replace-content:TEXT`,
//! `replace-user-content:TEXT`. In the text after the colon, `{iteration}`
//! becomes the event's iteration (0 for events without one) and `{tool}` the
//! tool's name on tool events (`tool-call-start`, `before-tool-call`,
//! `tool-call-result`). JSON is passed on unchecked, so invalid JSON tests
//! the host.
//!
//! The optional key `only_tool` limits the tool events' directives to calls
//! of that tool (others continue). Events without a key continue; keys that
//! name no event are ignored; a spec it cannot read panics, naming the event
//! and the spec.

use hookbox_sdk::{
    ContentBlock, Directive, Event, Hook, config, event_iteration, event_name, event_tool_name, export_hook,
};

/// The directive `spec` stands for at an event of `iteration`, about
/// `tool` (for tool events).
pub fn parse_spec(spec: &str, iteration: u32, tool: Option<&str>) -> Result<Directive, String> {
    let (kind, arg) = match spec.split_once(':') {
        Some((kind, arg)) => (kind.trim(), Some(fill(arg, iteration, tool))),
        None => (spec.trim(), None),
    };
    let text = |arg: Option<String>| arg.ok_or_else(|| format!("`{kind}` needs a value: `{kind}:...`"));
    let text_block = |arg| text(arg).map(|t| vec![ContentBlock::Text(t)]);
    Ok(match kind {
        "continue" if arg.is_none() => Directive::Continue,
        "pause" if arg.is_none() => Directive::Pause,
        "continue" | "pause" => return Err(format!("`{kind}` takes no value")),
        "skip-tool" => Directive::SkipTool(arg),
        "abort" => Directive::Abort(arg),
        "inject-message" => Directive::InjectMessage(text(arg)?),
        "retry" => Directive::Retry(text(arg)?),
        "reject" => Directive::Reject(text(arg)?),
        "skip-run" => Directive::SkipRun(text(arg)?),
        "replace-arguments" => Directive::ReplaceArguments(text(arg)?),
        "replace-result" => Directive::ReplaceResult(text(arg)?),
        "replace-content" => Directive::ReplaceContent(text_block(arg)?),
        "replace-user-content" => Directive::ReplaceUserContent(text_block(arg)?),
        _ => return Err(format!("unknown directive `{kind}`")),
    })
}

/// Replaces `{iteration}` and, on tool events, `{tool}` in `text`.
fn fill(text: &str, iteration: u32, tool: Option<&str>) -> String {
    let text = text.replace("{iteration}", &iteration.to_string());
    match tool {
        Some(tool) => text.replace("{tool}", tool),
        None => text,
    }
}

struct Scripted;

impl Hook for Scripted {
    fn new() -> Self {
        Scripted
    }

    fn on_event(&mut self, event: &Event) -> Directive {
        let name = event_name(event);
        let Some(spec) = config::get(name) else {
            return Directive::Continue;
        };
        let tool = event_tool_name(event);
        if let (Some(tool), Some(only)) = (tool, config::get("only_tool"))
            && tool != only
        {
            return Directive::Continue;
        }
        parse_spec(&spec, event_iteration(event).unwrap_or(0), tool)
            .unwrap_or_else(|e| panic!("scripted: bad spec `{spec}` for `{name}`: {e}"))
    }
}

export_hook!(Scripted);

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(spec: &str) -> Directive {
        parse_spec(spec, 2, Some("read_file")).unwrap()
    }

    fn text(t: &str) -> Vec<ContentBlock> {
        vec![ContentBlock::Text(t.into())]
    }

    #[test]
    fn every_spec() {
        assert_eq!(parse("continue"), Directive::Continue);
        assert_eq!(parse("pause"), Directive::Pause);
        assert_eq!(parse("skip-tool"), Directive::SkipTool(None));
        assert_eq!(parse("skip-tool:no"), Directive::SkipTool(Some("no".into())));
        assert_eq!(parse("abort"), Directive::Abort(None));
        assert_eq!(parse("abort:stop"), Directive::Abort(Some("stop".into())));
        assert_eq!(parse("inject-message:hi"), Directive::InjectMessage("hi".into()));
        assert_eq!(parse("retry:again"), Directive::Retry("again".into()));
        assert_eq!(parse("reject:no"), Directive::Reject("no".into()));
        assert_eq!(parse("skip-run:later"), Directive::SkipRun("later".into()));
        assert_eq!(
            parse(r#"replace-arguments:{"path": "b:c"}"#),
            Directive::ReplaceArguments(r#"{"path": "b:c"}"#.into())
        );
        assert_eq!(parse("replace-result:ok"), Directive::ReplaceResult("ok".into()));
        assert_eq!(parse("replace-content:x"), Directive::ReplaceContent(text("x")));
        assert_eq!(parse("replace-user-content:y"), Directive::ReplaceUserContent(text("y")));
    }

    #[test]
    fn placeholders_are_filled() {
        assert_eq!(parse("inject-message:{tool} at {iteration}"), Directive::InjectMessage("read_file at 2".into()));
        assert_eq!(parse_spec("retry:{tool} at {iteration}", 0, None).unwrap(), Directive::Retry("{tool} at 0".into()));
    }

    #[test]
    fn bad_specs_are_errors() {
        for spec in ["explode", "retry", "pause:now", "continue:x", ""] {
            assert!(parse_spec(spec, 1, None).is_err(), "{spec}");
        }
    }
}
