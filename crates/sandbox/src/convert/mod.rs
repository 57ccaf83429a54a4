//! Conversions between the host's serde types ([`hookbox_contract`]) and the
//! types `bindgen!` generates for each frozen `hookbox:hooks` version: one
//! module per version ([`v0_1_0`], [`v0_2_0`]).
//!
//! What every version shares (usage, finish reasons, content blocks, tool
//! calls, the borrowed lists of an event, the events 0.1.0 already had and
//! its directives) is written once, in [`wit_conversions!`], and expanded in
//! each module against that version's generated types. Each module writes
//! only what differs: the records that grew (`tool-call-result`,
//! `final-answer`) and the directives it added. Lowering to an older
//! version leaves the newer fields out; lifting never has to refuse a
//! directive, since an older plugin cannot produce a newer one.

pub(crate) mod v0_1_0;
pub(crate) mod v0_2_0;

/// Expands, inside a version module that has `wit` (the version's
/// `types` interface) in scope and defines
/// `fn tool_call_result<'b>(e: &'b Event) -> wit::ToolCallResult<'b>` and
/// `fn final_answer<'b>(lists: &'b WitLists<'_>, e: &'b Event) -> wit::FinalAnswer<'b>`:
/// the shared helpers, [`WitLists`](v0_2_0::WitLists) with `new` and `event`,
/// and `directive_from_wit`, whose match gets the version's own directive
/// arms after the 0.1.0 ones.
macro_rules! wit_conversions {
    (extra_directives { $($arms:tt)* }) => {
        use hookbox_contract::{ContentBlock, Directive, Event, FinishReason, ToolCall, Usage};

        fn usage(u: &Usage) -> wit::Usage {
            wit::Usage {
                input_tokens: u.input_tokens,
                output_tokens: u.output_tokens,
                cache_read_tokens: u.cache_read_tokens,
                cache_write_tokens: u.cache_write_tokens,
                cost_usd: u.cost,
            }
        }

        fn finish(f: FinishReason) -> wit::FinishReason {
            match f {
                FinishReason::Stop => wit::FinishReason::Stop,
                FinishReason::ToolCall => wit::FinishReason::ToolCall,
                FinishReason::Length => wit::FinishReason::Length,
                FinishReason::ContentFilter => wit::FinishReason::ContentFilter,
                FinishReason::Other => wit::FinishReason::Other,
            }
        }

        fn content_from_wit(blocks: Vec<wit::ContentBlockResult>) -> Vec<ContentBlock> {
            blocks
                .into_iter()
                .map(|b| match b {
                    wit::ContentBlockResult::Text(t) => ContentBlock::Text(t),
                })
                .collect()
        }

        fn call(c: &ToolCall) -> wit::ToolCall<'_> {
            wit::ToolCall { id: &c.id, name: &c.name, arguments: &c.arguments }
        }

        /// The lists an event's WIT form borrows (the WIT types hold slices of
        /// borrowed records); every string is borrowed from the host event, so no
        /// text is copied before it is lowered into the guest.
        #[derive(Default)]
        pub(crate) struct WitLists<'a> {
            content: Vec<wit::ContentBlockParam<'a>>,
            calls: Vec<wit::ToolCall<'a>>,
            names: Vec<&'a str>,
        }

        impl<'a> WitLists<'a> {
            /// The lists of `e` (empty for events without any).
            pub(crate) fn new(e: &'a Event) -> Self {
                let content = |blocks: &'a [ContentBlock]| {
                    blocks
                        .iter()
                        .map(|b| match b {
                            ContentBlock::Text(t) => wit::ContentBlockParam::Text(t),
                        })
                        .collect()
                };
                match e {
                    Event::RunStart { user_content, .. } => {
                        WitLists { content: content(user_content), ..Self::default() }
                    }
                    Event::ModelResponse { content: c, tool_calls, .. }
                    | Event::FinalAnswer { content: c, tool_calls, .. } => {
                        WitLists { content: content(c), calls: tool_calls.iter().map(call).collect(), ..Self::default() }
                    }
                    Event::IterationComplete { tools_called, .. } => {
                        WitLists { names: tools_called.iter().map(String::as_str).collect(), ..Self::default() }
                    }
                    _ => Self::default(),
                }
            }

            /// The WIT form of `e`, the event these lists were made from.
            pub(crate) fn event<'b>(&'b self, e: &'b Event) -> wit::Event<'b> {
                match e {
                    Event::RunStart { run_id, session_id, model, provider, .. } => wit::Event::RunStart(wit::RunStart {
                        run_id,
                        session_id,
                        model,
                        provider,
                        user_content: &self.content,
                    }),
                    Event::IterationStart { iteration, loop_counter } => {
                        wit::Event::IterationStart(wit::IterationStart {
                            iteration: *iteration,
                            loop_counter: *loop_counter,
                        })
                    }
                    Event::RequestStart { request_index, iteration, attempt, purpose, model, provider } => {
                        wit::Event::RequestStart(wit::RequestStart {
                            request_index: *request_index,
                            iteration: *iteration,
                            attempt: *attempt,
                            purpose,
                            model,
                            provider,
                        })
                    }
                    Event::ModelResponse { iteration, text, reasoning, finish_reason, usage: u, .. } => {
                        wit::Event::ModelResponse(wit::ModelResponse {
                            iteration: *iteration,
                            text,
                            content: &self.content,
                            tool_calls: &self.calls,
                            reasoning,
                            finish_reason: finish(*finish_reason),
                            usage: u.as_ref().map(usage),
                        })
                    }
                    Event::ToolCallStart { iteration, call: c } => {
                        wit::Event::ToolCallStart(wit::ToolCallEvent { iteration: *iteration, call: call(c) })
                    }
                    Event::BeforeToolCall { iteration, call: c } => {
                        wit::Event::BeforeToolCall(wit::ToolCallEvent { iteration: *iteration, call: call(c) })
                    }
                    Event::ToolCallResult { .. } => wit::Event::ToolCallResult(tool_call_result(e)),
                    Event::IterationComplete { iteration, usage: u, stop_reason, .. } => {
                        wit::Event::IterationComplete(wit::IterationComplete {
                            iteration: *iteration,
                            usage: usage(u),
                            tools_called: &self.names,
                            stop_reason: finish(*stop_reason),
                        })
                    }
                    Event::FinalAnswer { .. } => wit::Event::FinalAnswer(final_answer(self, e)),
                    Event::RunEnd { iterations, usage: u, error } => wit::Event::RunEnd(wit::RunEnd {
                        iterations: *iterations,
                        usage: usage(u),
                        error: error.as_deref(),
                    }),
                }
            }
        }

        /// The host form of a directive a guest returned.
        pub(crate) fn directive_from_wit(d: wit::Directive) -> Directive {
            match d {
                wit::Directive::Continue => Directive::Continue,
                wit::Directive::SkipTool(m) => Directive::SkipTool(m),
                wit::Directive::ReplaceArguments(a) => Directive::ReplaceArguments(a),
                wit::Directive::ReplaceResult(r) => Directive::ReplaceResult(r),
                wit::Directive::ReplaceContent(c) => Directive::ReplaceContent(content_from_wit(c)),
                wit::Directive::ReplaceUserContent(c) => Directive::ReplaceUserContent(content_from_wit(c)),
                wit::Directive::InjectMessage(m) => Directive::InjectMessage(m),
                wit::Directive::Retry(f) => Directive::Retry(f),
                wit::Directive::Reject(r) => Directive::Reject(r),
                wit::Directive::SkipRun(r) => Directive::SkipRun(r),
                wit::Directive::Pause => Directive::Pause,
                wit::Directive::Abort(r) => Directive::Abort(r),
                $($arms)*
            }
        }
    };
}
pub(crate) use wit_conversions;
