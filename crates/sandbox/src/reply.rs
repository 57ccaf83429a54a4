//! Checking a directive a hook returned, before the host copies, records or
//! applies it: [`check_directive`] measures it against the plugin's
//! [`Limits`] (lowered size, content blocks) and checks `replace-arguments`
//! is a JSON object. [`crate::WasmHook`] calls it on every reply, right after
//! wasmtime lifts the directive out of guest memory; embedders with native
//! hooks of untrusted origin, and the fuzz target, can call it too.

use hookbox_contract::{ContentBlock, Directive};

use crate::options::Limits;

/// Canonical ABI size of a `directive` value's fixed part, in bytes (the
/// variant's tag and its widest payload, a pointer and a length).
pub const DIRECTIVE_FIXED_BYTES: u64 = 16;
/// Canonical ABI size of one `content-block` element, in bytes.
pub const BLOCK_FIXED_BYTES: u64 = 12;

/// A directive the host will not use: over a cap, or malformed. Recorded as
/// an `invalid-output` failure of the call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidOutput {
    /// What is wrong, with the figures (e.g. "`replace-content` carries 100000
    /// content blocks, over max_output_blocks = 1024").
    pub message: String,
}

/// What `d` takes lowered by the canonical ABI: `(bytes, content blocks)`.
/// Bytes count every string's bytes plus [`DIRECTIVE_FIXED_BYTES`] and
/// [`BLOCK_FIXED_BYTES`] per content block, so a list of empty blocks is
/// counted, not free. Saturates at `u64::MAX`.
pub fn lowered_size(d: &Directive) -> (u64, u64) {
    let len = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    let opt = |m: &Option<String>| m.as_ref().map_or(0, |s| len(s.len()));
    let blocks = |b: &[ContentBlock]| -> (u64, u64) {
        let bytes = b.iter().fold(0u64, |acc, c| match c {
            ContentBlock::Text(t) => acc.saturating_add(BLOCK_FIXED_BYTES).saturating_add(len(t.len())),
        });
        (bytes, len(b.len()))
    };
    let (payload, count) = match d {
        Directive::Continue | Directive::Pause => (0, 0),
        Directive::SkipTool(m) | Directive::Abort(m) => (opt(m), 0),
        Directive::ReplaceArguments(s)
        | Directive::ReplaceResult(s)
        | Directive::InjectMessage(s)
        | Directive::Retry(s)
        | Directive::Reject(s)
        | Directive::SkipRun(s)
        | Directive::AskApproval(s)
        | Directive::SkipModelCall(s) => (len(s.len()), 0),
        Directive::PostMessage { to, text } => (len(to.len()).saturating_add(len(text.len())), 0),
        Directive::ReplaceContent(b) | Directive::ReplaceUserContent(b) => blocks(b),
    };
    (DIRECTIVE_FIXED_BYTES.saturating_add(payload), count)
}

/// Returns `d` if the host may use it under `limits`: at most
/// `max_output_blocks` content blocks, a lowered size ([`lowered_size`]) of
/// at most `max_output_bytes`, and for `replace-arguments` a JSON object.
///
/// Errors: [`InvalidOutput`] naming the directive and the cap it broke.
pub fn check_directive(d: Directive, limits: &Limits) -> Result<Directive, InvalidOutput> {
    let (bytes, blocks) = lowered_size(&d);
    let action = d.action();
    if blocks > limits.max_output_blocks {
        return Err(InvalidOutput {
            message: format!(
                "`{action}` carries {blocks} content blocks, over max_output_blocks = {}",
                limits.max_output_blocks
            ),
        });
    }
    if bytes > limits.max_output_bytes {
        return Err(InvalidOutput {
            message: format!(
                "`{action}` is {bytes} bytes lowered, over max_output_bytes = {}",
                limits.max_output_bytes
            ),
        });
    }
    if let Directive::ReplaceArguments(args) = &d {
        match serde_json::from_str::<serde_json::Value>(args) {
            Ok(serde_json::Value::Object(_)) => {}
            Ok(_) => {
                return Err(InvalidOutput { message: "replace-arguments is valid JSON but not an object".into() });
            }
            Err(e) => return Err(InvalidOutput { message: format!("replace-arguments is not valid JSON: {e}") }),
        }
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_blocks_count_toward_the_lowered_size() {
        let d = Directive::ReplaceContent(vec![ContentBlock::Text(String::new()); 1_000]);
        assert_eq!(lowered_size(&d), (16 + 12_000, 1_000));
        let limits = Limits { max_output_bytes: 12_000, ..Limits::default() };
        let err = check_directive(d.clone(), &limits).expect_err("over the byte cap");
        assert_eq!(err.message, "`replace-content` is 12016 bytes lowered, over max_output_bytes = 12000");
        let limits = Limits { max_output_blocks: 999, ..Limits::default() };
        let err = check_directive(d.clone(), &limits).expect_err("over the block cap");
        assert!(err.message.contains("1000 content blocks, over max_output_blocks = 999"), "{err}");
        assert_eq!(check_directive(d.clone(), &Limits::default()), Ok(d));
    }

    #[test]
    fn replace_arguments_must_be_a_json_object() {
        let limits = Limits::default();
        assert!(check_directive(Directive::ReplaceArguments("[1]".into()), &limits).is_err());
        assert!(check_directive(Directive::ReplaceArguments("{".into()), &limits).is_err());
        let ok = Directive::ReplaceArguments(r#"{"path":"a"}"#.into());
        assert_eq!(check_directive(ok.clone(), &limits), Ok(ok));
        assert_eq!(lowered_size(&Directive::Continue), (16, 0));
    }
}
