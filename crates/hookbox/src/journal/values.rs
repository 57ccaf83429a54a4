//! The values a journal holds: import values, journaled state, tool outcomes.

use hookbox_contract::truncate_ellipsis;
use serde::{Deserialize, Serialize};

/// One value a hook got from a journaled import.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "import", rename_all = "kebab-case")]
pub enum ImportValue {
    /// `hookbox:hooks/host.now`: seconds and nanoseconds since the Unix epoch.
    Now {
        /// Whole seconds.
        seconds: u64,
        /// Nanoseconds past `seconds`.
        nanoseconds: u32,
    },
    /// `hookbox:hooks/host.random`.
    Random {
        /// The number.
        value: u64,
    },
    /// `hookbox:hooks/host.uuid`.
    Uuid {
        /// The hyphenated UUID.
        value: String,
    },
    /// `hookbox:hooks/host.sleep`: the wait asked for, in milliseconds.
    Sleep {
        /// Milliseconds.
        ms: u64,
    },
    /// `hookbox:hooks/host.get-state`: the state the store held.
    State {
        /// The state, if one was saved.
        state: Option<JournalState>,
    },
    /// `wasi:clocks/wall-clock.now`.
    WallClock {
        /// Whole seconds since the Unix epoch.
        seconds: u64,
        /// Nanoseconds past `seconds`.
        nanoseconds: u32,
    },
    /// `wasi:clocks/monotonic-clock.now`, in nanoseconds.
    MonotonicClock {
        /// Nanoseconds since an arbitrary origin (this process's first reading).
        ns: u64,
    },
    /// Bytes from `wasi:random/random` (`insecure: false`) or `wasi:random/insecure`.
    RandomBytes {
        /// True for the insecure generator.
        insecure: bool,
        /// The bytes, as lowercase hex.
        hex: String,
    },
    /// `wasi:random/insecure-seed`, fixed when an instance is created.
    InsecureSeed {
        /// The low 64 bits.
        low: u64,
        /// The high 64 bits.
        high: u64,
    },
}

impl ImportValue {
    /// The import's name in reports, e.g. `now` or `wasi:clocks/wall-clock`.
    pub fn import(&self) -> &'static str {
        match self {
            ImportValue::Now { .. } => "now",
            ImportValue::Random { .. } => "random",
            ImportValue::Uuid { .. } => "uuid",
            ImportValue::Sleep { .. } => "sleep",
            ImportValue::State { .. } => "get-state",
            ImportValue::WallClock { .. } => "wasi:clocks/wall-clock",
            ImportValue::MonotonicClock { .. } => "wasi:clocks/monotonic-clock",
            ImportValue::RandomBytes { insecure: false, .. } => "wasi:random/random",
            ImportValue::RandomBytes { insecure: true, .. } => "wasi:random/insecure",
            ImportValue::InsecureSeed { .. } => "wasi:random/insecure-seed",
        }
    }
}

impl ImportValue {
    /// The import with the argument that tells two calls apart (`sleep(5 ms)`,
    /// `wasi:random/random (16 bytes)`), for reports.
    pub fn what(&self) -> String {
        match self {
            ImportValue::Sleep { ms } => format!("sleep({ms} ms)"),
            ImportValue::RandomBytes { hex, .. } => format!("{} ({} bytes)", self.import(), hex.len() / 2),
            _ => self.import().to_string(),
        }
    }

    /// Checks a value read from a file: nanoseconds below 10^9, hex that is
    /// hex, a UUID that is one.
    pub(crate) fn check(&self) -> Result<(), String> {
        match self {
            ImportValue::Now { nanoseconds, .. } | ImportValue::WallClock { nanoseconds, .. }
                if *nanoseconds >= 1_000_000_000 =>
            {
                Err(format!("`nanoseconds` {nanoseconds} is not below 1,000,000,000"))
            }
            ImportValue::RandomBytes { hex, .. } | ImportValue::State { state: Some(JournalState { hex, .. }) }
                if from_hex(hex).is_none() =>
            {
                Err(format!("`hex` is not an even-length hex string: {}", truncate_ellipsis(hex, 40)))
            }
            ImportValue::Uuid { value } if uuid::Uuid::parse_str(value).is_err() => {
                Err(format!("`value` {} is not a UUID", truncate_ellipsis(value, 60)))
            }
            _ => Ok(()),
        }
    }
}

/// A hook state as journaled: the version that wrote it and its bytes as hex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalState {
    /// The plugin version that wrote it.
    pub version: String,
    /// The bytes, as lowercase hex.
    pub hex: String,
}

/// Lowercase hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The bytes of `hex`, or `None` if it is not an even-length hex string.
pub fn from_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len()).step_by(2).map(|i| hex.get(i..i + 2).and_then(|p| u8::from_str_radix(p, 16).ok())).collect()
}

/// What one tool call produced, as journaled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRecord {
    /// The call's id.
    pub tool_call_id: String,
    /// The tool's name.
    pub name: String,
    /// False when a hook declined the call (no tool ran).
    pub ran: bool,
    /// The tool's result text, before the result cap.
    pub content: String,
    /// False when the tool failed or refused.
    pub success: bool,
    /// What the tool reported spending, in US dollars.
    pub reported_cost: Option<f64>,
    /// True when that spend is the tool's estimate.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cost_estimated: bool,
    /// How long it took, in milliseconds (hooks see it in `tool-call-result`).
    pub duration_ms: u64,
}
