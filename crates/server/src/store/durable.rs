//! The shapes of the store calls of durable runs (issue 17): a live run's
//! checkpoint at a safe point ([`Checkpointed`]), a run parked
//! ([`ParkRow`]) and a run claimed to be resumed or started
//! ([`ClaimedRun`]).

#[cfg(doc)]
use super::ServerStore;
use super::{RunEventRow, RunRow};

/// What a safe point stores of a live run's checkpoint ([`ServerStore::save_checkpoint`]).
#[derive(Debug, Clone, Copy)]
pub enum Checkpointed<'a> {
    /// None any more: the stored checkpoint and its parts are forgotten.
    Forget,
    /// The whole checkpoint (`crate::checkpoint::ParkedRun` as JSON): it
    /// replaces the stored one, and its parts are forgotten.
    Whole(&'a str),
    /// What the journal gained since the last safe point
    /// (`crate::journal_parts::JournalPart` as JSON), appended to the
    /// stored checkpoint as its `number`th part since it (1-based; storing
    /// the same number twice keeps the first: a write tried again).
    Part {
        /// Its number after the whole checkpoint (1-based).
        number: u32,
        /// Its text.
        text: &'a str,
    },
}

/// Which claim of a run a write comes from: a fencing token. A run stored
/// by the worker that runs it is its [`Claim::FIRST`]; each claim of it
/// ([`ServerStore::claim_resumable`]) is one more. A store that several
/// workers share takes a write to a live run only from its owner's latest
/// claim (else `Fenced`; a status or a release refused changes nothing
/// and is no error), and gives commands and forgets approvals only to
/// it, so a task of an earlier claim, even one of the
/// same worker's (its lease lapsed and it took the run back), never writes
/// over a later one's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Claim(pub i64);

impl Claim {
    /// The claim of a run stored by the worker that runs it.
    pub const FIRST: Claim = Claim(1);
}

/// A parked run a worker claimed to resume it.
#[derive(Debug, Clone)]
pub struct ClaimedRun {
    /// Its tenant's name.
    pub tenant: String,
    /// The run.
    pub run: RunRow,
    /// Its checkpoint text (`crate::checkpoint::ParkedRun` as JSON).
    pub parked: String,
    /// True when it was `queued` (not started yet) rather than `resumable`.
    pub queued: bool,
    /// The id of the last event stored of its stream.
    pub last_seq: i64,
    /// This claim of it: every write of the resumed run carries it.
    pub claim: Claim,
}

/// A run to park ([`ServerStore::park_run`]).
#[derive(Debug, Clone, Copy)]
pub struct ParkRow<'a> {
    /// Its stream so far.
    pub events: &'a [RunEventRow],
    /// Its checkpoint, `crate::checkpoint::ParkedRun` as JSON.
    pub checkpoint: &'a str,
    /// The approval it waits for, if it waits for one: its id, and its data
    /// as `GET /v1/approvals` shows it (`None`: parked in a pause).
    pub approval: Option<(&'a str, &'a serde_json::Value)>,
    /// The tenant's `parked_runs` quota.
    pub max_parked: u32,
    /// Model spend of the run not counted yet, counted now: the UTC day
    /// (`YYYY-MM-DD`) and USD.
    pub spend: Option<(&'a str, f64)>,
}
