//! `scripted`: a Hookbox test fixture that returns, for each event, the
//! directive its config names. Each config key is an event's kebab-case name
//! (`run-start`, `before-tool-call`, ...) and its value a directive spec:
//! `continue`, `skip-tool`, `skip-tool:MSG`, `inject-message:TEXT`, `abort`,
//! `abort:REASON`, `pause`, `retry:TEXT`, `reject:TEXT`, `skip-run:TEXT`,
//! `replace-arguments:JSON`, `replace-result:TEXT`, `replace-content:TEXT`,
//! `replace-user-content:TEXT`, and WIT 0.2.0's `ask-approval:REASON`,
//! `skip-model-call:REASON` and `post-message:SESSION:TEXT`. In the text after
//! the colon, `{iteration}` becomes the event's iteration (0 for events
//! without one), `{tool}` the tool's name on tool events (`tool-call-start`,
//! `before-tool-call`, `tool-call-result`), `{arguments}` the arguments the
//! call ran with at `tool-call-result`, and `{run}`, `{session}`, `{turn}`,
//! `{retries}` and `{max_iterations}` the event context's fields. JSON is
//! passed on unchecked, so invalid JSON tests the host.
//!
//! The optional key `only_tool` limits the tool events' directives to calls
//! of that tool, and `only_iteration` the directives of events with an
//! iteration to that iteration (others continue). Events without a key
//! continue; keys that name no event are ignored; a spec it cannot read
//! panics, naming the event and the spec.

use hookbox_sdk::{
    ContentBlock, Directive, Event, EventContext, Hook, Post, config, context, event_iteration, event_name,
    event_tool_name, export_hook,
};

/// What the placeholders of a spec stand for at one event.
#[derive(Debug, Clone, Default)]
pub struct Vars<'a> {
    /// The event's iteration (0 for events without one).
    pub iteration: u32,
    /// The tool's name, on tool events.
    pub tool: Option<&'a str>,
    /// The arguments the call ran with, at `tool-call-result`.
    pub arguments: Option<&'a str>,
    /// The event's context.
    pub context: Option<&'a EventContext>,
}

/// The directive `spec` stands for at an event described by `vars`.
pub fn parse_spec(spec: &str, vars: &Vars<'_>) -> Result<Directive, String> {
    let (kind, arg) = match spec.split_once(':') {
        Some((kind, arg)) => (kind.trim(), Some(fill(arg, vars))),
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
        "ask-approval" => Directive::AskApproval(text(arg)?),
        "skip-model-call" => Directive::SkipModelCall(text(arg)?),
        "post-message" => {
            let arg = text(arg)?;
            let (to, text) = arg.split_once(':').ok_or("`post-message` needs `post-message:SESSION:TEXT`")?;
            Directive::PostMessage(Post { to: to.to_string(), text: text.to_string() })
        }
        _ => return Err(format!("unknown directive `{kind}`")),
    })
}

/// Replaces the placeholders `vars` has values for in `text`.
fn fill(text: &str, vars: &Vars<'_>) -> String {
    let mut text = text.replace("{iteration}", &vars.iteration.to_string());
    if let Some(tool) = vars.tool {
        text = text.replace("{tool}", tool);
    }
    if let Some(arguments) = vars.arguments {
        text = text.replace("{arguments}", arguments);
    }
    if let Some(cx) = vars.context {
        text = text
            .replace("{run}", &cx.run_id)
            .replace("{session}", &cx.session_id)
            .replace("{turn}", &cx.turn.to_string())
            .replace("{retries}", &cx.retries.to_string())
            .replace("{max_iterations}", &cx.max_iterations.to_string());
    }
    text
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
        let iteration = event_iteration(event);
        if let (Some(iteration), Some(only)) = (iteration, config::get("only_iteration"))
            && iteration.to_string() != only
        {
            return Directive::Continue;
        }
        let context = context();
        let arguments = match event {
            Event::ToolCallResult(e) => Some(e.arguments.as_str()),
            _ => None,
        };
        let vars = Vars { iteration: iteration.unwrap_or(0), tool, arguments, context: Some(&context) };
        parse_spec(&spec, &vars).unwrap_or_else(|e| panic!("scripted: bad spec `{spec}` for `{name}`: {e}"))
    }
}

export_hook!(Scripted);

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(spec: &str) -> Directive {
        parse_spec(spec, &Vars { iteration: 2, tool: Some("read_file"), ..Vars::default() }).unwrap()
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
        assert_eq!(parse("ask-approval:why"), Directive::AskApproval("why".into()));
        assert_eq!(parse("skip-model-call:done"), Directive::SkipModelCall("done".into()));
        assert_eq!(
            parse("post-message:sub-1:hi: there"),
            Directive::PostMessage(Post { to: "sub-1".into(), text: "hi: there".into() })
        );
    }

    #[test]
    fn placeholders_are_filled() {
        assert_eq!(parse("inject-message:{tool} at {iteration}"), Directive::InjectMessage("read_file at 2".into()));
        assert_eq!(
            parse_spec("retry:{tool} at {iteration}", &Vars::default()).unwrap(),
            Directive::Retry("{tool} at 0".into())
        );
        let cx = EventContext {
            run_id: "r1".into(),
            session_id: "s1".into(),
            turn: 3,
            iteration: 2,
            max_iterations: 9,
            retries: 1,
        };
        let vars = Vars { iteration: 2, tool: None, arguments: Some("{}"), context: Some(&cx) };
        assert_eq!(
            parse_spec("inject-message:{run} {session} {turn} {retries}/{max_iterations} {arguments}", &vars).unwrap(),
            Directive::InjectMessage("r1 s1 3 1/9 {}".into())
        );
    }

    #[test]
    fn bad_specs_are_errors() {
        for spec in ["explode", "retry", "pause:now", "continue:x", "", "post-message:no-text", "ask-approval"] {
            assert!(parse_spec(spec, &Vars::default()).is_err(), "{spec}");
        }
    }
}
