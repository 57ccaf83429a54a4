//! The host side of the plugin boundary, for the `directives` target:
//! arbitrary directives, failures and logs, as a hostile plugin could return
//! them, go through [`check_directive`] (as `WasmHook` does with every reply)
//! and a [`HookChain`] of up to 4 hooks, which applies the chain rules and
//! records everything. Checked: nothing panics; a directive that passes the
//! checks is within the caps; a terminal decision is a chain-ending
//! directive valid at the event (or a fail-closed or disagreement decline);
//! an ignored directive is recorded abridged; every record round-trips
//! through JSON.

use std::collections::VecDeque;

use arbitrary::{Result, Unstructured};
use async_trait::async_trait;
use hookbox_sandbox::contract::{
    ABRIDGED_BLOCKS, ContentBlock, Directive, DirectiveRecord, Event, EventContext, EventKind, FailureKind,
    FinishReason, HookFailure, HookLog, ToolCall, Usage,
};
use hookbox_sandbox::{DispatchTrace, FailPolicy, HookChain, HookHandler, HookReply, Limits, check_directive, reply};

/// Characters of each string an ignored directive's record keeps (the chain's cut), plus the `…`.
const ABRIDGED_CHARS: usize = 256 + 1;

/// A hook that answers from a list of prepared replies, then `continue`.
struct Scripted {
    name: String,
    fail: FailPolicy,
    observe: bool,
    replies: VecDeque<HookReply>,
}

#[async_trait]
impl HookHandler for Scripted {
    fn name(&self) -> &str {
        &self.name
    }
    fn fail_policy(&self) -> FailPolicy {
        self.fail
    }
    fn observe_only(&self) -> bool {
        self.observe
    }
    async fn on_event(&mut self, _event: &Event, _context: &EventContext) -> HookReply {
        self.replies.pop_front().unwrap_or(HookReply {
            outcome: Ok(Directive::Continue),
            logs: Vec::new(),
            suspension: None,
            fuel_used: 0,
            duration_us: 0,
        })
    }
}

fn text(u: &mut Unstructured<'_>) -> Result<String> {
    u.arbitrary()
}

fn blocks(u: &mut Unstructured<'_>) -> Result<Vec<ContentBlock>> {
    let n = u.int_in_range(0..=40)?;
    (0..n).map(|_| text(u).map(ContentBlock::Text)).collect()
}

fn directive(u: &mut Unstructured<'_>) -> Result<Directive> {
    Ok(match u.int_in_range(0..=13u8)? {
        0 => Directive::Continue,
        1 => Directive::SkipTool(u.arbitrary()?),
        2 => {
            Directive::ReplaceArguments(if u.arbitrary()? { format!("{{\"path\":{:?}}}", text(u)?) } else { text(u)? })
        }
        3 => Directive::ReplaceResult(text(u)?),
        4 => Directive::ReplaceContent(blocks(u)?),
        5 => Directive::ReplaceUserContent(blocks(u)?),
        6 => Directive::InjectMessage(text(u)?),
        7 => Directive::Retry(text(u)?),
        8 => Directive::Reject(text(u)?),
        9 => Directive::SkipRun(text(u)?),
        10 => Directive::Pause,
        11 => Directive::AskApproval(text(u)?),
        12 => Directive::SkipModelCall(text(u)?),
        _ => Directive::Abort(u.arbitrary()?),
    })
}

fn event(u: &mut Unstructured<'_>) -> Result<Event> {
    Ok(match u.int_in_range(0..=3u8)? {
        0 => {
            Event::BeforeToolCall { iteration: 1, call: ToolCall { id: text(u)?, name: text(u)?, arguments: text(u)? } }
        }
        1 => Event::ToolCallResult {
            iteration: 1,
            tool_name: text(u)?,
            tool_call_id: text(u)?,
            result: text(u)?,
            truncated: u.arbitrary()?,
            success: u.arbitrary()?,
            duration_ms: u.arbitrary()?,
            reported_cost: None,
            cost_estimated: false,
            arguments: text(u)?,
            result_data: None,
        },
        2 => Event::FinalAnswer {
            text: text(u)?,
            content: blocks(u)?,
            finish_reason: FinishReason::Stop,
            usage: Usage::default(),
            tool_calls: Vec::new(),
            reasoning: text(u)?,
        },
        _ => Event::RunEnd { iterations: 1, usage: Usage::default(), error: u.arbitrary()? },
    })
}

/// One reply as `WasmHook` would give it: the directive checked against `limits`.
fn checked_reply(u: &mut Unstructured<'_>, plugin: &str, kind: EventKind, limits: &Limits) -> Result<HookReply> {
    let logs = (0..u.int_in_range(0..=8)?)
        .map(|_| Ok(HookLog { plugin: plugin.to_string(), level: text(u)?, message: text(u)? }))
        .collect::<Result<Vec<_>>>()?;
    let failure = |kind_failed: FailureKind, message: String| HookFailure {
        plugin: plugin.to_string(),
        event: kind.to_string(),
        kind: kind_failed,
        message,
        fuel_used: 0,
        duration_us: 1,
    };
    let outcome = if u.ratio(1, 8)? {
        Err(failure(FailureKind::Trap, text(u)?))
    } else {
        let d = directive(u)?;
        let (bytes, count) = reply::lowered_size(&d);
        match check_directive(d, limits) {
            Ok(d) => {
                assert!(bytes <= limits.max_output_bytes && count <= limits.max_output_blocks);
                Ok(d)
            }
            Err(e) => Err(failure(FailureKind::InvalidOutput, e.message)),
        }
    };
    Ok(HookReply { outcome, logs, suspension: None, fuel_used: 1, duration_us: 1 })
}

fn assert_abridged(record: &DirectiveRecord) {
    let short = |s: &str| assert!(s.chars().count() <= ABRIDGED_CHARS, "an ignored directive is recorded whole");
    match &record.directive {
        Directive::ReplaceContent(b) | Directive::ReplaceUserContent(b) => {
            assert!(b.len() <= ABRIDGED_BLOCKS + 1, "{} blocks recorded", b.len());
            b.iter().for_each(|ContentBlock::Text(t)| short(t));
        }
        Directive::SkipTool(Some(s)) | Directive::Abort(Some(s)) => short(s),
        Directive::ReplaceArguments(s)
        | Directive::ReplaceResult(s)
        | Directive::InjectMessage(s)
        | Directive::Retry(s)
        | Directive::Reject(s)
        | Directive::SkipRun(s) => short(s),
        _ => {}
    }
}

/// Decodes a chain and an event from `data`, dispatches, and checks the invariants.
pub fn directives(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(event) = event(&mut u) else { return };
    let kind = event.kind();
    let limits = Limits {
        max_output_bytes: u.int_in_range(16..=4_096).unwrap_or(1 << 20),
        max_output_blocks: u.int_in_range(0..=16).unwrap_or(1_024),
        ..Limits::default()
    };
    let mut hooks: Vec<Box<dyn HookHandler>> = Vec::new();
    let mut logs_given = 0;
    for i in 0..u.int_in_range(1..=4usize).unwrap_or(1) {
        let name = format!("hook-{i}");
        let replies: Vec<HookReply> = (0..2).map_while(|_| checked_reply(&mut u, &name, kind, &limits).ok()).collect();
        logs_given += replies.iter().map(|r| r.logs.len()).sum::<usize>();
        let fail = if u.arbitrary().unwrap_or(false) { FailPolicy::Closed } else { FailPolicy::Open };
        let observe = fail == FailPolicy::Open && u.ratio(1, 4).unwrap_or(false);
        hooks.push(Box::new(Scripted { name, fail, observe, replies: replies.into() }));
    }
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().build() else { return };
    let (decision, trace) = rt.block_on(async {
        let mut chain = HookChain::new(hooks);
        let mut trace = DispatchTrace::default();
        let decision = chain.dispatch(&event, &EventContext::default(), &mut trace).await;
        chain.drain(&mut trace).await;
        (decision, trace)
    });
    if let Some(terminal) = &decision.terminal {
        assert!(terminal.ends_chain() && terminal.valid_at(kind), "{terminal:?} at {kind}");
    }
    assert!(trace.logs.len() <= logs_given, "the chain invents no logs");
    for record in &trace.directives {
        if !record.honoured {
            assert_abridged(record);
        }
        let json = serde_json::to_string(record).expect("a record serializes");
        let back: DirectiveRecord = serde_json::from_str(&json).expect("a record parses back");
        assert_eq!(&back, record, "a record round-trips through JSON");
    }
    for failure in &trace.failures {
        serde_json::to_string(failure).expect("a failure serializes");
    }
}
