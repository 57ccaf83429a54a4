//! `redact-secrets`: replaces API-key-like strings in tool results with
//! `[REDACTED]` before the model sees them (`replace-result` at
//! `tool-call-result`), and logs how many it redacted in this run.
//!
//! Patterns: OpenAI/Anthropic-style `sk-…` keys, AWS access key ids
//! (`AKIA…`), GitHub tokens (`ghp_…`, `github_pat_…`), Slack tokens
//! (`xox?-…`), Google API keys (`AIza…`), and `NAME=value` / `NAME: value`
//! assignments whose name ends in KEY, SECRET, TOKEN or PASSWORD.
//!
//! A hook sees the first `tool_result_preview_chars` characters of a result
//! (500 by default). When the result was cut (`truncated`), the rest cannot
//! be checked, so by default (`on_truncated = "cut"`) the model gets the
//! redacted preview plus a note; `on_truncated = "pass"` leaves such results
//! alone unless the preview holds a secret. Set the host's
//! `tool_result_preview_chars = 0` to check whole results.
//!
//! It keeps the total number of redactions of the session in its host-kept
//! state (`{"redactions": N}`), so the count survives instance replacement
//! and process restarts (`hookbox run --session ID --state-db FILE`).

use hookbox_sdk::serde_json::json;
use hookbox_sdk::{Directive, Hook, RunStart, ToolCallResult, config, export_hook, log, state};
use regex::Regex;

/// The replacement text.
pub const REDACTED: &str = "[REDACTED]";

/// The secret patterns; the first (assignments) keeps the name and separator.
pub fn patterns() -> Vec<Regex> {
    [
        // Assignments first, so `API_KEY=sk-…` counts once: a name that is, or ends
        // in `_`/`-` plus, key/secret/token/password (so `monkey: banana` is left
        // alone), optionally quoted as in JSON or YAML, then `=` or `:` and a value.
        r#"(?i)((?:\b|["'])(?:[a-z0-9]+[_-])*(?:api[_-]?key|access[_-]?key|secret(?:[_-]?key)?|key|token|password|passwd)["']?)(\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s,;}]+)"#,
        r"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}",
        r"AKIA[0-9A-Z]{16}",
        r"gh[pousr]_[A-Za-z0-9]{30,}",
        r"github_pat_[A-Za-z0-9_]{30,}",
        r"xox[abposr]-[A-Za-z0-9\-]{10,}",
        r"AIza[0-9A-Za-z_\-]{35}",
    ]
    .iter()
    .map(|p| Regex::new(p).unwrap_or_else(|e| panic!("redact-secrets: bad built-in pattern `{p}`: {e}")))
    .collect()
}

/// `text` with every secret replaced, and how many were replaced.
pub fn redact(patterns: &[Regex], text: &str) -> (String, usize) {
    let mut out = text.to_string();
    let mut count = 0;
    for (i, re) in patterns.iter().enumerate() {
        let assignment = i == 0;
        let n = re.find_iter(&out).count();
        if n == 0 {
            continue;
        }
        count += n;
        out = if assignment {
            re.replace_all(&out, format!("${{1}}${{2}}\"{REDACTED}\"").as_str()).into_owned()
        } else {
            re.replace_all(&out, REDACTED).into_owned()
        };
    }
    (out, count)
}

struct RedactSecrets {
    patterns: Vec<Regex>,
    pass_truncated: bool,
    redacted_this_run: usize,
}

impl Hook for RedactSecrets {
    fn new() -> Self {
        let pass_truncated = match config::get("on_truncated").as_deref() {
            None | Some("cut") => false,
            Some("pass") => true,
            Some(other) => panic!("redact-secrets: `on_truncated` must be `cut` or `pass`, got `{other}`"),
        };
        RedactSecrets { patterns: patterns(), pass_truncated, redacted_this_run: 0 }
    }

    fn run_start(&mut self, _event: &RunStart) -> Directive {
        self.redacted_this_run = 0;
        Directive::Continue
    }

    fn tool_call_result(&mut self, event: &ToolCallResult) -> Directive {
        let (clean, n) = redact(&self.patterns, &event.result);
        if n > 0 {
            self.redacted_this_run += n;
            let before = state::get_json::<hookbox_sdk::serde_json::Value>()
                .and_then(|(_, v)| v.ok())
                .and_then(|v| v["redactions"].as_u64())
                .unwrap_or(0);
            let total = before + n as u64;
            if let Err(e) = state::set_json(&json!({ "redactions": total })) {
                log::warn(&format!("cannot save the redaction count: {e}"));
            }
            log::info(&format!(
                "redacted {n} secret(s) from `{}` ({} this run, {total} this session)",
                event.tool_name, self.redacted_this_run
            ));
        }
        if event.truncated && !self.pass_truncated {
            return Directive::ReplaceResult(format!(
                "{clean}\n[redact-secrets: the result was cut here because only its first part could be checked]"
            ));
        }
        if n > 0 { Directive::ReplaceResult(clean) } else { Directive::Continue }
    }
}

export_hook!(RedactSecrets);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_keys_and_assignments() {
        let p = patterns();
        let (out, n) = redact(
            &p,
            "API_KEY=sk-demo-not-a-real-key-1234\nname=alice\ntoken: ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        );
        assert_eq!(n, 2, "{out}");
        assert!(out.contains(r#"API_KEY="[REDACTED]""#) && out.contains(r#"token: "[REDACTED]""#), "{out}");
        assert!(!out.contains("sk-demo") && !out.contains("ghp_"), "{out}");
        assert!(out.contains("name=alice"));
        assert_eq!(redact(&p, "nothing to see"), ("nothing to see".to_string(), 0));
        let (out, n) = redact(&p, r#"{"password": "hunter2", "aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG"}"#);
        assert_eq!(n, 2, "{out}");
        assert!(!out.contains("hunter2") && !out.contains("wJalr"), "{out}");
        assert_eq!(redact(&p, "The monkey: banana, hockey = fun").1, 0, "words ending in key are not names");
        let (out, n) = redact(&p, "aws AKIAABCDEFGHIJKLMNOP here");
        assert_eq!((out.as_str(), n), ("aws [REDACTED] here", 1));
    }
}
