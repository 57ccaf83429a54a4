//! `deny-tools`: a Hookbox hook that vetoes tool calls at `before-tool-call`,
//! by tool name or by a path argument matching a glob, answering with
//! `skip-tool` and a reason such as
//! "deny-tools: `delete_file` on `.env` is denied (pattern `.env`)".
//! Every other event, and every call nothing matches, continues.
//!
//! Config keys (each list is a JSON array of strings or a single string):
//! - `tools`: tool names denied outright.
//! - `paths`: globs of denied paths. A pattern without `/` matches any one
//!   component of the path, so `.env` denies `.env`, `app/.env` and
//!   `.env/x`, and `*.pem` any `.pem` file anywhere; a pattern with `/`
//!   matches the whole path relative to the workspace (`*` stays within a
//!   component, `**` crosses them), or any directory above it. Paths are
//!   normalised first (a leading `./`, `.` components and `a/..` pairs are
//!   dropped); absolute paths only meet patterns without `/`.
//! - `path_keys`: the argument keys that hold paths (a string or an array of
//!   strings); default `path`, `file`, `file_path`, `filename`, `dir`,
//!   `directory`, and the agents' `notebook_path`, `absolute_path`, `paths`,
//!   `file_paths`, `target_file`.
//! - `command_keys`: the argument keys that hold a shell command (a string
//!   or an array of strings); default `command`, `cmd`. Each word of the
//!   command (split at whitespace, quotes and the shell's operators
//!   `; | & < > ( ) $ \` =`; words starting with `-` skipped) is checked
//!   against `paths` like a path argument, so `rm -f .env` and
//!   `cat x > .env` are denied. This is a word check, not a shell: a
//!   command that builds the name at run time (`cat $(echo .e)nv`) is not
//!   seen, so keep secrets out of the workspace the agent's shell can reach.
//! - `message`: the reason's prefix instead of `deny-tools`.
//!
//! Arguments that are not valid JSON are logged as a warning, and only the
//! `tools` rule applies to them. An invalid config (a bad glob, a list that
//! is not a list of strings) panics at the first `before-tool-call`, so the
//! host records a hook failure rather than the hook silently denying
//! nothing: configure the plugin fail-closed to turn that failure into
//! `skip-tool`.

use glob::{MatchOptions, Pattern};
use hookbox_sdk::serde_json::Value;
use hookbox_sdk::{Directive, Hook, ToolCallEvent, ToolCallExt, config, directive, export_hook, log};

/// The config keys this plugin reads.
pub const CONFIG_KEYS: [&str; 5] = ["tools", "paths", "path_keys", "command_keys", "message"];

/// The argument keys that hold paths when `path_keys` is not set.
pub const DEFAULT_PATH_KEYS: [&str; 11] = [
    "path",
    "file",
    "file_path",
    "filename",
    "dir",
    "directory",
    // The agents' own tools: Claude Code's NotebookEdit, Gemini CLI's read_file and
    // read_many_files, Cursor's edit tools.
    "notebook_path",
    "absolute_path",
    "paths",
    "file_paths",
    "target_file",
];

/// The argument keys that hold a shell command when `command_keys` is not set.
pub const DEFAULT_COMMAND_KEYS: [&str; 2] = ["command", "cmd"];

/// Where a shell command is split into words.
const SHELL_SEPARATORS: &[char] = &[';', '|', '&', '<', '>', '(', ')', '$', '`', '=', '"', '\'', '\\'];

const MATCH: MatchOptions =
    MatchOptions { case_sensitive: true, require_literal_separator: true, require_literal_leading_dot: false };

/// What the plugin denies, read from its config.
#[derive(Debug)]
pub struct Policy {
    tools: Vec<String>,
    paths: Vec<PathRule>,
    path_keys: Vec<String>,
    command_keys: Vec<String>,
    prefix: String,
}

/// One `paths` glob.
#[derive(Debug)]
struct PathRule {
    /// The pattern as configured, for the reason.
    text: String,
    glob: Pattern,
    /// True when the pattern has a `/`: it matches the whole path.
    whole_path: bool,
}

impl Policy {
    /// Reads the policy through `get` (the plugin's config lookup).
    pub fn from_config(get: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let list = |key: &str| -> Result<Option<Vec<String>>, String> {
            get(key)
                .map(|raw| config::parse_string_list(&raw))
                .transpose()
                .map_err(|e| format!("deny-tools: config `{key}` must be a string or an array of strings: {e}"))
        };
        let paths = list("paths")?.unwrap_or_default().into_iter().map(PathRule::new).collect::<Result<_, _>>()?;
        let path_keys = list("path_keys")?.unwrap_or_else(|| DEFAULT_PATH_KEYS.map(str::to_owned).to_vec());
        let prefix = get("message")
            .map(|m| m.trim().to_owned())
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| "deny-tools".to_owned());
        let command_keys = list("command_keys")?.unwrap_or_else(|| DEFAULT_COMMAND_KEYS.map(str::to_owned).to_vec());
        Ok(Self { tools: list("tools")?.unwrap_or_default(), paths, path_keys, command_keys, prefix })
    }

    /// The reason to deny a call of `tool` with `args` (its parsed arguments,
    /// if they parsed), or `None` to let it run.
    pub fn check(&self, tool: &str, args: Option<&Value>) -> Option<String> {
        if self.tools.iter().any(|t| t == tool) {
            return Some(format!("{}: tool `{tool}` is denied", self.prefix));
        }
        let args = args?.as_object()?;
        let strings = |keys: &[String]| -> Vec<&str> {
            keys.iter()
                .filter_map(|key| args.get(key))
                .flat_map(|value| match value {
                    Value::String(text) => vec![text.as_str()],
                    Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
                    _ => Vec::new(),
                })
                .collect()
        };
        let on_path = strings(&self.path_keys).into_iter().find_map(|path| {
            let rule = self.matching_rule(path)?;
            Some(format!("{}: `{tool}` on `{path}` is denied (pattern `{}`)", self.prefix, rule.text))
        });
        on_path.or_else(|| {
            strings(&self.command_keys)
                .into_iter()
                .flat_map(|command| command.split(|c: char| c.is_whitespace() || SHELL_SEPARATORS.contains(&c)))
                .filter(|word| !word.is_empty() && !word.starts_with('-'))
                .find_map(|word| {
                    let rule = self.matching_rule(word)?;
                    Some(format!(
                        "{}: `{tool}` command names `{word}`, which is denied (pattern `{}`)",
                        self.prefix, rule.text
                    ))
                })
        })
    }

    fn matching_rule(&self, path: &str) -> Option<&PathRule> {
        let components = normalize(path);
        if components.is_empty() {
            return None;
        }
        self.paths.iter().find(|rule| rule.matches(&components))
    }
}

impl PathRule {
    fn new(text: String) -> Result<Self, String> {
        let trimmed = text.trim();
        let trimmed = trimmed.strip_prefix("./").unwrap_or(trimmed);
        let trimmed = trimmed.trim_end_matches('/');
        let glob = Pattern::new(trimmed).map_err(|e| format!("deny-tools: invalid glob `{text}` in `paths`: {e}"))?;
        Ok(Self { whole_path: trimmed.contains('/'), text, glob })
    }

    /// Whether the rule matches the normalised path `components`.
    fn matches(&self, components: &[&str]) -> bool {
        if self.whole_path {
            // The path itself or any directory above it.
            (1..=components.len()).any(|n| self.glob.matches_with(&components[..n].join("/"), MATCH))
        } else {
            components.iter().any(|c| self.glob.matches_with(c, MATCH))
        }
    }
}

/// Splits `path` into components, dropping empty and `.` ones and
/// resolving `a/..` pairs (a `..` with nothing before it is kept).
fn normalize(path: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." if out.last().is_some_and(|last| *last != "..") => {
                out.pop();
            }
            _ => out.push(part),
        }
    }
    out
}

/// The hook: reads its policy at the first `before-tool-call`.
struct DenyTools {
    policy: Option<Policy>,
}

impl Hook for DenyTools {
    fn new() -> Self {
        Self { policy: None }
    }

    fn before_tool_call(&mut self, event: &ToolCallEvent) -> Directive {
        let policy = self.policy.get_or_insert_with(load_policy);
        let call = &event.call;
        let args = call
            .args_value()
            .inspect_err(|e| {
                log::warn(&format!(
                    "deny-tools: arguments of `{}` (call {}) are not valid JSON, path rules skipped: {e}",
                    call.name, call.id
                ));
            })
            .ok();
        match policy.check(&call.name, args.as_ref()) {
            Some(reason) => directive::skip_tool(reason),
            None => Directive::Continue,
        }
    }
}

/// Reads the policy from the host; an invalid config is a panic (see the
/// crate docs).
fn load_policy() -> Policy {
    for key in config::keys() {
        if !CONFIG_KEYS.contains(&key.as_str()) {
            log::warn(&format!("deny-tools: unknown config key `{key}` ignored"));
        }
    }
    Policy::from_config(config::get).unwrap_or_else(|e| panic!("{e}"))
}

export_hook!(DenyTools);

#[cfg(test)]
mod tests {
    use super::*;
    use hookbox_sdk::serde_json::json;

    fn policy(pairs: &[(&str, &str)]) -> Policy {
        Policy::from_config(|key| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| (*v).to_owned())).unwrap()
    }

    fn check(policy: &Policy, tool: &str, args: Value) -> Option<String> {
        policy.check(tool, Some(&args))
    }

    #[test]
    fn a_shell_command_naming_a_denied_path_is_denied() {
        let p = policy(&[("paths", r#"[".env", "secrets/**"]"#)]);
        for command in ["rm -f .env", "cat x > .env", "cp a 'app/.env'", "echo $(cat secrets/k)", "A=1 cat ./.env;ls"] {
            let reason = check(&p, "Bash", json!({"command": command}));
            assert!(reason.as_deref().is_some_and(|r| r.contains("is denied")), "{command}: {reason:?}");
        }
        for command in ["ls -la", "cat README.md", "echo env", "grep -r --exclude=.envrc x"] {
            assert_eq!(check(&p, "Bash", json!({"command": command})), None, "{command}");
        }
        assert!(check(&p, "shell", json!({"cmd": ["rm", ".env"]})).is_some());
        // Gemini CLI's file tools.
        assert!(check(&p, "read_file", json!({"absolute_path": "/w/.env"})).is_some());
        assert!(check(&p, "read_many_files", json!({"paths": ["/w/a", "/w/.env"]})).is_some());
        let custom = policy(&[("paths", ".env"), ("command_keys", "script")]);
        assert!(check(&custom, "run", json!({"script": "cat .env"})).is_some());
        assert_eq!(check(&custom, "Bash", json!({"command": "cat .env"})), None);
    }

    #[test]
    fn denies_listed_tools_whatever_the_arguments() {
        let p = policy(&[("tools", r#"["delete_file", "shell"]"#)]);
        assert_eq!(p.check("shell", None).as_deref(), Some("deny-tools: tool `shell` is denied"));
        assert!(check(&p, "delete_file", json!({})).is_some());
        assert_eq!(check(&p, "read_file", json!({"path": ".env"})), None);
    }

    #[test]
    fn a_single_string_is_a_list_of_one() {
        let p = policy(&[("tools", "shell"), ("paths", ".env")]);
        assert!(p.check("shell", None).is_some());
        assert!(check(&p, "read_file", json!({"path": ".env"})).is_some());
    }

    #[test]
    fn pattern_without_slash_matches_any_component() {
        let p = policy(&[("paths", r#"[".env", "*.pem"]"#)]);
        assert_eq!(
            check(&p, "delete_file", json!({"path": ".env"})).as_deref(),
            Some("deny-tools: `delete_file` on `.env` is denied (pattern `.env`)")
        );
        for path in ["./.env", "app/.env", "/abs/dir/.env", ".env/inner", "keys/a.pem"] {
            assert!(check(&p, "read_file", json!({"path": path})).is_some(), "{path}");
        }
        for path in [".envrc", "env", "a.pem.txt", ""] {
            assert_eq!(check(&p, "read_file", json!({"path": path})), None, "{path}");
        }
    }

    #[test]
    fn pattern_with_slash_matches_the_whole_relative_path() {
        let p = policy(&[("paths", r#"["config/*.toml", "./secrets/**", "deploy/keys"]"#)]);
        for path in [
            "config/a.toml",
            "./config/a.toml",
            "config/./a.toml",
            "x/../config/a.toml",
            "secrets/a/b/c",
            "deploy/keys",
            "deploy/keys/id_rsa",
        ] {
            assert!(check(&p, "read_file", json!({"path": path})).is_some(), "{path}");
        }
        for path in ["config/sub/a.toml", "app/config/a.toml", "a.toml", "deploy/keys2"] {
            assert_eq!(check(&p, "read_file", json!({"path": path})), None, "{path}");
        }
    }

    #[test]
    fn dot_dot_does_not_escape_a_rule() {
        let p = policy(&[("paths", "secrets/*")]);
        assert!(check(&p, "read_file", json!({"path": "a/../secrets/key"})).is_some());
        assert_eq!(check(&p, "read_file", json!({"path": "../secrets/key"})), None, "outside the workspace");
    }

    #[test]
    fn path_keys_default_and_custom() {
        let p = policy(&[("paths", ".env")]);
        for key in DEFAULT_PATH_KEYS {
            assert!(check(&p, "t", json!({ key: ".env" })).is_some(), "{key}");
        }
        assert_eq!(check(&p, "t", json!({"target": ".env"})), None);

        let p = policy(&[("paths", ".env"), ("path_keys", r#"["target"]"#)]);
        assert!(check(&p, "t", json!({"target": ".env"})).is_some());
        assert_eq!(check(&p, "t", json!({"path": ".env"})), None);
    }

    #[test]
    fn array_arguments_and_non_string_values() {
        let p = policy(&[("paths", ".env"), ("path_keys", "paths")]);
        assert!(check(&p, "t", json!({"paths": ["a.txt", "b/.env"]})).is_some());
        assert_eq!(check(&p, "t", json!({"paths": 3})), None);
        assert_eq!(check(&p, "t", json!([".env"])), None);
        assert_eq!(p.check("t", None), None);
    }

    #[test]
    fn custom_message_prefix() {
        let p = policy(&[("paths", ".env"), ("message", "policy")]);
        assert_eq!(
            check(&p, "read_file", json!({"file": "./.env"})).as_deref(),
            Some("policy: `read_file` on `./.env` is denied (pattern `.env`)")
        );
    }

    #[test]
    fn invalid_config_is_an_error() {
        let get = |pairs: &'static [(&'static str, &'static str)]| {
            move |key: &str| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| (*v).to_owned())
        };
        let err = Policy::from_config(get(&[("paths", "[\"a[\"]")])).unwrap_err();
        assert!(err.contains("invalid glob `a[`"), "{err}");
        let err = Policy::from_config(get(&[("tools", "[1, 2]")])).unwrap_err();
        assert!(err.contains("config `tools`"), "{err}");
    }

    #[test]
    fn normalize_paths() {
        assert_eq!(normalize("./a//b/./c/"), ["a", "b", "c"]);
        assert_eq!(normalize("a/../../b"), ["..", "b"]);
        assert_eq!(normalize("/"), Vec::<&str>::new());
    }
}
