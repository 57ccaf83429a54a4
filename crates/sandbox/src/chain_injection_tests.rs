//! Rules for what a hook hands the run rather than the event: injections
//! accumulate and a blank one (or a blank post) is an `invalid-output`
//! failure; an injection at an event no turn boundary follows is still
//! handed to the run (seed 000: "`inject_message` is valid anywhere").

use super::*;

/// Rule: injections accumulate in chain order across hooks; `pause` sets the
/// decision's pause and does not end the chain.
#[tokio::test]
async fn injections_accumulate_and_pause_is_set() {
    let a = ScriptedHook::new("a").on(EventKind::IterationStart, Directive::InjectMessage("one".into()));
    let b = ScriptedHook::new("b").on(EventKind::IterationStart, Directive::Pause);
    let c = ScriptedHook::new("c").on(EventKind::IterationStart, Directive::InjectMessage("two".into()));
    let (decision, trace) = dispatch(&mut chain(vec![a, b, c]), &iteration_start(1)).await;

    assert_eq!(decision.injections, vec!["one".to_string(), "two".to_string()]);
    assert!(decision.pause);
    assert_eq!(trace.directives[1], record("b", &iteration_start(1), Directive::Pause, None));
    assert_eq!(trace.directives.iter().map(|d| d.plugin.as_str()).collect::<Vec<_>>(), vec!["a", "b", "c"]);
}

/// Seed 000, `inject_message`: "empty text raises". A blank `inject-message`
/// is an `invalid-output` failure (handled by the plugin's fail policy),
/// never an empty user message.
#[tokio::test]
async fn a_blank_injection_is_an_invalid_output_failure() {
    let a = ScriptedHook::new("a").on(EventKind::IterationStart, Directive::InjectMessage(" \n\t".into()));
    let b = ScriptedHook::new("b").on(EventKind::IterationStart, Directive::InjectMessage("kept".into()));
    let (decision, trace) = dispatch(&mut chain(vec![a, b]), &iteration_start(1)).await;
    assert_eq!(decision.injections, vec!["kept".to_string()]);
    let recorded: Vec<_> = trace.directives.iter().map(|d| d.plugin.as_str()).collect();
    assert_eq!(recorded, vec!["b"], "the blank one is a failure, not a directive");
    assert_eq!(trace.failures.len(), 1);
    assert_eq!((trace.failures[0].plugin.as_str(), trace.failures[0].kind), ("a", FailureKind::InvalidOutput));
}

/// A `post-message` with blank text or to a blank session is an
/// `invalid-output` failure too, never a post.
#[tokio::test]
async fn a_blank_post_is_an_invalid_output_failure() {
    let post = |to: &str, text: &str| Directive::PostMessage { to: to.into(), text: text.into() };
    let a = ScriptedHook::new("a").on(EventKind::IterationStart, post("sub", " "));
    let b = ScriptedHook::new("b").on(EventKind::IterationStart, post(" \t", "hi"));
    let c = ScriptedHook::new("c").on(EventKind::IterationStart, post("sub", "hi"));
    let (decision, trace) = dispatch(&mut chain(vec![a, b, c]), &iteration_start(1)).await;
    assert_eq!(decision.posts, vec![("c".to_string(), "sub".to_string(), "hi".to_string())]);
    let failed: Vec<_> = trace.failures.iter().map(|f| (f.plugin.as_str(), f.kind)).collect();
    assert_eq!(failed, vec![("a", FailureKind::InvalidOutput), ("b", FailureKind::InvalidOutput)]);
}

/// Seed 000: "`inject_message` is valid anywhere". At `final-answer` (a
/// plain call) and at `run-end` (a detached observation call) the text is
/// handed to the run, which reports it undelivered: no turn boundary follows.
#[tokio::test]
async fn an_injection_at_final_answer_or_run_end_is_handed_to_the_run() {
    let a = ScriptedHook::new("a")
        .on(EventKind::FinalAnswer, Directive::InjectMessage("late".into()))
        .on(EventKind::RunEnd, Directive::InjectMessage("later".into()));
    let mut hooks = chain(vec![a]);
    let (decision, trace) = dispatch(&mut hooks, &final_answer()).await;
    assert_eq!(decision.injections, vec!["late".to_string()]);
    assert!(trace.directives[0].honoured);
    let (decision, mut trace) = dispatch(&mut hooks, &run_end()).await;
    hooks.drain(&mut trace).await;
    assert!(decision.injections.is_empty(), "a run-end call is detached");
    assert_eq!(trace.injections, vec!["later".to_string()], "collected with the detached call");
    assert!(trace.directives.iter().all(|d| d.honoured), "{:?}", trace.directives);
}
