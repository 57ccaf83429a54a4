//! `fs-escape`: a Hookbox test fixture that tries to reach files and the
//! environment through `std::fs` and `std::env` at `before-tool-call`, logs
//! the outcome of each attempt at info level, then continues (every other
//! event continues without trying anything). Each line starts with the
//! attempt's name, then `: ALLOWED (...)` or `: denied (ERROR)`:
//!
//! - `read /etc/passwd`, `read ../../etc/passwd`: `ALLOWED (N bytes)`.
//! - `env NAME` for the variable named by config `env_var` (default `HOME`):
//!   `set (N chars)` or `unset`; the value itself is never logged. Then
//!   `env vars: N set` counts the whole environment.
//! - `list /`: `ALLOWED (N entries: a, b, ...)` (at most 10 names).
//! - With config `guest_dir` set (a guest path such as `/data`):
//!   `read GUEST_DIR/allowed.txt` (`ALLOWED (N bytes): CONTENT`, the content
//!   as UTF-8, lossy), `write GUEST_DIR/written.txt` (writes `pwned`:
//!   `ALLOWED (5 bytes)`), and `read GUEST_DIR/../../etc/passwd`.

use std::fmt::Display;
use std::{env, fs};

use hookbox_sdk::{Directive, Hook, ToolCallEvent, config, export_hook, log};

fn report<T>(attempt: &str, outcome: Result<T, impl Display>, allowed: impl FnOnce(T) -> String) {
    match outcome {
        Ok(value) => log::info(&format!("{attempt}: ALLOWED ({})", allowed(value))),
        Err(e) => log::info(&format!("{attempt}: denied ({e})")),
    }
}

fn try_read(path: &str) {
    report(&format!("read {path}"), fs::read(path), |bytes| format!("{} bytes", bytes.len()));
}

fn try_list(path: &str) {
    let names = fs::read_dir(path)
        .and_then(|dir| dir.map(|entry| entry.map(|e| e.file_name().to_string_lossy().into_owned())).collect());
    report(&format!("list {path}"), names, |names: Vec<String>| {
        let shown: Vec<&str> = names.iter().take(10).map(String::as_str).collect();
        format!("{} entries: {}", names.len(), shown.join(", "))
    });
}

fn try_env(name: &str) {
    match env::var_os(name) {
        Some(value) => log::info(&format!("env {name}: set ({} chars)", value.to_string_lossy().chars().count())),
        None => log::info(&format!("env {name}: unset")),
    }
    log::info(&format!("env vars: {} set", env::vars_os().count()));
}

fn try_guest_dir(dir: &str) {
    let allowed = format!("{dir}/allowed.txt");
    match fs::read(&allowed) {
        Ok(bytes) => {
            log::info(&format!("read {allowed}: ALLOWED ({} bytes): {}", bytes.len(), String::from_utf8_lossy(&bytes)))
        }
        Err(e) => log::info(&format!("read {allowed}: denied ({e})")),
    }
    let written = format!("{dir}/written.txt");
    report(&format!("write {written}"), fs::write(&written, "pwned"), |()| "5 bytes".to_owned());
    try_read(&format!("{dir}/../../etc/passwd"));
}

struct FsEscape;

impl Hook for FsEscape {
    fn new() -> Self {
        FsEscape
    }

    fn before_tool_call(&mut self, _event: &ToolCallEvent) -> Directive {
        try_read("/etc/passwd");
        try_read("../../etc/passwd");
        try_env(&config::get("env_var").unwrap_or_else(|| "HOME".to_owned()));
        try_list("/");
        if let Some(dir) = config::get("guest_dir") {
            try_guest_dir(dir.trim_end_matches('/'));
        }
        Directive::Continue
    }
}

export_hook!(FsEscape);
