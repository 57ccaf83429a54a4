//! Rule: a veto holds (`docs/contract.md`, "A veto holds"). At
//! `before-tool-call`, every hook decides on the arguments that will run:
//! when a hook replaces them, the hooks before it are asked again with the
//! final arguments.

use super::*;

/// Issue 13, B.6: guard `a` allows `README.md`; `b`, later in the chain,
/// rewrites the path to `.env`. `a` is asked again with `.env` and declines.
#[tokio::test]
async fn a_guard_before_a_rewrite_is_asked_again_with_the_final_arguments() {
    let deny = Directive::SkipTool(Some("no .env".into()));
    let a = ScriptedHook::new("a")
        .on(EventKind::BeforeToolCall, Directive::Continue)
        .on(EventKind::BeforeToolCall, deny.clone());
    let b =
        ScriptedHook::new("b").on(EventKind::BeforeToolCall, Directive::ReplaceArguments(r#"{"path":".env"}"#.into()));
    let (a_seen, b_seen) = (a.seen(), b.seen());
    let event = before_tool_call(r#"{"path":"README.md"}"#);
    let (decision, trace) = dispatch(&mut chain(vec![a, b]), &event).await;

    let rewritten = before_tool_call(r#"{"path":".env"}"#);
    assert_eq!(seen(&a_seen), vec![event.clone(), rewritten.clone()], "asked again with the final arguments");
    assert_eq!(seen(&b_seen), vec![event.clone()], "the last rewriter is not asked again");
    assert_eq!(decision.terminal, Some(deny.clone()));
    assert_eq!(trace.directives.last(), Some(&record("a", &event, deny, None)));
}

/// Hooks after the last rewrite already saw the final arguments and are not
/// asked again; with no rewrite nobody is asked twice.
#[tokio::test]
async fn only_hooks_before_the_last_rewrite_are_asked_again() {
    let a = ScriptedHook::new("a");
    let b = ScriptedHook::new("b").on(EventKind::BeforeToolCall, Directive::ReplaceArguments(r#"{"x":2}"#.into()));
    let c = ScriptedHook::new("c");
    let (a_seen, b_seen, c_seen) = (a.seen(), b.seen(), c.seen());
    let mut hooks = chain(vec![a, b, c]);
    let event = before_tool_call(r#"{"x":1}"#);
    let (decision, _) = dispatch(&mut hooks, &event).await;
    assert_eq!(decision.terminal, None);
    assert_eq!(decision.replace_arguments.as_deref(), Some(r#"{"x":2}"#));
    assert_eq!(seen(&a_seen).len(), 2);
    assert_eq!(seen(&b_seen).len(), 1);
    assert_eq!(seen(&c_seen), vec![before_tool_call(r#"{"x":2}"#)]);

    let plain = before_tool_call(r#"{"x":2}"#);
    let (a, b) = (ScriptedHook::new("a"), ScriptedHook::new("b"));
    let (a_seen, b_seen) = (a.seen(), b.seen());
    let (decision, trace) = dispatch(&mut chain(vec![a, b]), &plain).await;
    assert_eq!(decision, Decision::default());
    assert_eq!((seen(&a_seen).len(), seen(&b_seen).len()), (1, 1), "no rewrite, nobody asked twice");
    assert!(trace.directives.is_empty());
}

/// A hook that rewrites the final arguments again (to something else) in the
/// confirmation pass: no order agrees, so the tool call is declined. The
/// same arguments again (in any JSON spelling) are agreement.
#[tokio::test]
async fn a_second_rewrite_in_the_confirmation_pass_declines_the_call() {
    let a = ScriptedHook::new("a")
        .on(EventKind::BeforeToolCall, Directive::ReplaceArguments(r#"{"x":2}"#.into()))
        .on(EventKind::BeforeToolCall, Directive::ReplaceArguments(r#"{"x":4}"#.into()));
    let b = ScriptedHook::new("b").on(EventKind::BeforeToolCall, Directive::ReplaceArguments(r#"{"x":3}"#.into()));
    let (decision, trace) = dispatch(&mut chain(vec![a, b]), &before_tool_call(r#"{"x":1}"#)).await;
    let Some(Directive::SkipTool(Some(reason))) = &decision.terminal else { panic!("{decision:?}") };
    assert!(reason.contains("`a`") && reason.contains("do not agree"), "{reason}");
    assert_eq!(trace.directives.last().map(|d| d.plugin.as_str()), Some("a"));

    let a = ScriptedHook::new("a")
        .on(EventKind::BeforeToolCall, Directive::ReplaceArguments(r#"{"x":2}"#.into()))
        .on(EventKind::BeforeToolCall, Directive::ReplaceArguments(r#"{ "x" : 3 }"#.into()));
    let b = ScriptedHook::new("b").on(EventKind::BeforeToolCall, Directive::ReplaceArguments(r#"{"x":3}"#.into()));
    let (decision, _) = dispatch(&mut chain(vec![a, b]), &before_tool_call(r#"{"x":1}"#)).await;
    assert_eq!(decision.terminal, None);
    assert_eq!(decision.replace_arguments.as_deref(), Some(r#"{"x":3}"#));
}
