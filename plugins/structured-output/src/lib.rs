//! `structured-output`: seed 003's `StructuredOutputHook` as a WebAssembly hook.
//! It validates the run's final answer against a JSON Schema and, while
//! `max_retries` allows, drops an invalid answer and asks the model to correct
//! it (`retry`, with the validation errors). At the limit — `max_retries`
//! used, or the run's `max_iterations` reached, which it reads from the event
//! context (WIT 0.2.0: a `retry` now would fail the run with max-iterations
//! and lose the answer) — it accepts the last answer, or, when `on_limit =
//! "reject"`, fails the run (an `abort`: the run raises an error naming the
//! schema errors; seed 003: "raises ValueError, which fails the turn").
//!
//! Config (any other key is refused):
//! - `schema`: the JSON Schema (a TOML table or JSON text). Required.
//! - `max_retries`: corrections to ask for (default 2). Each counts toward the
//!   run's `max_iterations` on the host side.
//! - `on_limit`: `accept` (default) or `reject`.
//! - `schema_in_prompt`: append the schema to the user's message at `run-start`
//!   (default true). Corrections always include it.
//! - `enabled`: `false` lets answers through unchecked (default true).
//!
//! The answer may be wrapped in a Markdown code fence; the fence is ignored.
//! The retry count restarts at every `run-start`. A missing or invalid
//! `schema` panics at the first event, so the host records the
//! misconfiguration as a hook failure.

use hookbox_sdk::serde_json::{self, Value};
use hookbox_sdk::{
    ContentBlock, Directive, FinalAnswer, Hook, RunStart, config, content_text, context, directive, export_hook,
};

/// What to do when the retries are used up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnLimit {
    /// Keep the last answer.
    Accept,
    /// Fail the run (an `abort`, so the run raises an error).
    Reject,
}

/// The plugin's settings, parsed once.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The schema.
    pub schema: Value,
    /// Corrections to ask for.
    pub max_retries: u32,
    /// At the limit.
    pub on_limit: OnLimit,
    /// Whether to put the schema in the first user message.
    pub schema_in_prompt: bool,
    /// Whether to check answers at all.
    pub enabled: bool,
}

/// The config keys the plugin reads; any other is refused.
pub const KEYS: [&str; 5] = ["schema", "max_retries", "on_limit", "schema_in_prompt", "enabled"];

/// Parses a `true`/`false` key (default `default`). Errors name the key.
fn flag(get: &impl Fn(&str) -> Option<String>, key: &str, default: bool) -> Result<bool, String> {
    match get(key).as_deref().map(|v| v.trim_matches('"')) {
        None => Ok(default),
        Some("true") => Ok(true),
        Some("false") => Ok(false),
        Some(other) => Err(format!("structured-output: `{key}` must be true or false, got `{other}`")),
    }
}

/// Parses the settings from config lookups and the table's `keys`. Errors
/// name the key; a key the plugin does not read is an error (a typo such as
/// `enable` must not silently leave the check on or off).
pub fn settings(get: impl Fn(&str) -> Option<String>, keys: &[String]) -> Result<Settings, String> {
    if let Some(unknown) = keys.iter().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!("structured-output: unknown config key `{unknown}` (known: {})", KEYS.join(", ")));
    }
    let raw = get("schema").ok_or("structured-output: config `schema` is required")?;
    let schema: Value =
        serde_json::from_str(&raw).map_err(|e| format!("structured-output: `schema` is not JSON: {e}"))?;
    jsonschema::validator_for(&schema)
        .map_err(|e| format!("structured-output: `schema` is not a valid JSON Schema: {e}"))?;
    let max_retries = match get("max_retries") {
        None => 2,
        Some(v) => v
            .trim_matches('"')
            .parse()
            .map_err(|_| format!("structured-output: `max_retries` must be an integer, got `{v}`"))?,
    };
    let on_limit = match get("on_limit").as_deref() {
        None | Some("accept") => OnLimit::Accept,
        Some("reject") => OnLimit::Reject,
        Some(other) => {
            return Err(format!("structured-output: `on_limit` must be `accept` or `reject`, got `{other}`"));
        }
    };
    let schema_in_prompt = flag(&get, "schema_in_prompt", true)?;
    let enabled = flag(&get, "enabled", true)?;
    Ok(Settings { schema, max_retries, on_limit, schema_in_prompt, enabled })
}

/// The answer's JSON, without a surrounding Markdown code fence.
pub fn answer_json(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else { return t };
    let rest = rest.split_once('\n').map_or("", |(_, body)| body);
    rest.trim_end().strip_suffix("```").unwrap_or(rest).trim()
}

/// The validation errors of `text` against `schema`, empty when it is valid.
pub fn errors(schema: &Value, text: &str) -> Vec<String> {
    let instance: Value = match serde_json::from_str(answer_json(text)) {
        Ok(v) => v,
        Err(e) => return vec![format!("the answer is not JSON: {e}")],
    };
    match jsonschema::validator_for(schema) {
        Ok(v) => v.iter_errors(&instance).map(|e| format!("at `{}`: {e}", e.instance_path)).collect(),
        Err(e) => vec![format!("invalid schema: {e}")],
    }
}

struct StructuredOutput {
    settings: Settings,
    retries: u32,
}

impl Hook for StructuredOutput {
    fn new() -> Self {
        let settings = settings(config::get, &config::keys()).unwrap_or_else(|e| panic!("{e}"));
        StructuredOutput { settings, retries: 0 }
    }

    fn run_start(&mut self, event: &RunStart) -> Directive {
        self.retries = 0;
        if !self.settings.enabled || !self.settings.schema_in_prompt {
            return Directive::Continue;
        }
        let mut content = event.user_content.clone();
        content.push(ContentBlock::Text(format!(
            "\n\nAnswer with JSON only, matching this JSON Schema:\n{}",
            self.settings.schema
        )));
        Directive::ReplaceUserContent(content)
    }

    fn final_answer(&mut self, event: &FinalAnswer) -> Directive {
        if !self.settings.enabled {
            return Directive::Continue;
        }
        let text = if event.text.is_empty() { content_text(&event.content) } else { event.text.clone() };
        let errors = errors(&self.settings.schema, &text);
        let d = decide(&self.settings, self.retries, context().last_chance(), &errors);
        if matches!(d, Directive::Retry(_)) {
            self.retries += 1;
        }
        d
    }
}

/// What to answer for a final answer with these schema `errors` (none: it
/// is valid), after `retries` corrections, when `last_chance` says the run's
/// `max_iterations` leaves no room for another model call.
pub fn decide(settings: &Settings, retries: u32, last_chance: bool, errors: &[String]) -> Directive {
    if errors.is_empty() {
        return Directive::Continue;
    }
    if retries < settings.max_retries && !last_chance {
        return directive::retry(format!(
            "Your answer does not match the required JSON Schema:\n- {}\nReply again with JSON only, matching:\n{}",
            errors.join("\n- "),
            settings.schema
        ));
    }
    let why = if retries < settings.max_retries {
        "the run's max_iterations leaves no room for a correction".to_string()
    } else {
        format!("after {retries} correction(s)")
    };
    match settings.on_limit {
        OnLimit::Accept => Directive::Continue,
        OnLimit::Reject => directive::abort(format!(
            "structured-output: the answer still does not match the schema ({why}): {}",
            errors.join("; ")
        )),
    }
}

export_hook!(StructuredOutput);

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
    }

    #[test]
    fn validates_and_explains() {
        assert!(errors(&schema(), r#"{"city": "Paris"}"#).is_empty());
        assert!(errors(&schema(), "```json\n{\"city\": \"Paris\"}\n```").is_empty());
        let e = errors(&schema(), r#"{"town": "Paris"}"#);
        assert_eq!(e.len(), 1);
        assert!(e[0].contains("city"), "{e:?}");
        assert!(errors(&schema(), "Paris")[0].contains("not JSON"));
    }

    /// Seed 003 (StructuredOutput): "at the agent's max_iterations the hook
    /// accepts the last answer" — or fails the turn with `on_limit = "reject"`.
    #[test]
    fn at_max_iterations_the_last_answer_is_accepted_or_rejected() {
        let s = schema().to_string();
        let mut settings = settings(|k| (k == "schema").then(|| s.clone()), &["schema".into()]).expect("ok");
        let bad = vec!["at ``: missing city".to_string()];
        assert!(matches!(decide(&settings, 0, false, &bad), Directive::Retry(_)), "room left: a correction");
        assert_eq!(decide(&settings, 0, true, &bad), Directive::Continue, "no room: the last answer stands");
        assert_eq!(decide(&settings, 2, false, &bad), Directive::Continue, "max_retries used");
        assert_eq!(decide(&settings, 0, true, &[]), Directive::Continue);
        settings.on_limit = OnLimit::Reject;
        let Directive::Abort(Some(reason)) = decide(&settings, 0, true, &bad) else { panic!("an abort") };
        assert!(reason.contains("max_iterations"), "{reason}");
        let Directive::Abort(Some(reason)) = decide(&settings, 2, false, &bad) else { panic!("an abort") };
        assert!(reason.contains("after 2 correction(s)"), "{reason}");
    }

    #[test]
    fn settings_name_the_bad_key() {
        let s = schema().to_string();
        let only_schema = vec!["schema".to_string()];
        let ok = settings(|k| (k == "schema").then(|| s.clone()), &only_schema).expect("ok");
        assert_eq!((ok.max_retries, ok.on_limit, ok.schema_in_prompt, ok.enabled), (2, OnLimit::Accept, true, true));
        assert!(settings(|_| None, &[]).unwrap_err().contains("schema"));
        let bad = settings(
            |k| match k {
                "schema" => Some(s.clone()),
                "on_limit" => Some("maybe".into()),
                _ => None,
            },
            &["schema".into(), "on_limit".into()],
        );
        assert!(bad.unwrap_err().contains("on_limit"));
        // Seed 003: `enabled = false` lets answers through; a misspelt key is refused.
        let off = settings(|k| (k == "schema").then(|| s.clone()).or((k == "enabled").then(|| "false".into())), &[]);
        assert!(!off.expect("ok").enabled);
        let typo = settings(|k| (k == "schema").then(|| s.clone()), &["schema".into(), "enable".into()]);
        assert!(typo.unwrap_err().contains("unknown config key `enable`"));
    }
}
