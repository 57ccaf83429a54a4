//! [`LogBudget`]: how many log records and bytes one call may still produce,
//! cut to what the plugin's run budget leaves, and the one note that says
//! what was dropped. Every record — a `log` call, a line of stdout or
//! stderr — is admitted here before the host allocates anything for it, so
//! a plugin logging empty strings in a loop costs the host a counter, not
//! memory.

use crate::options::Limits;

/// What a plugin may still log in this run (kept by its handler across calls).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunLogBudget {
    pub(crate) records_left: u64,
    pub(crate) bytes_left: u64,
    /// The note saying the run's budget is spent was given (it is given once).
    pub(crate) spent_noted: bool,
}

impl RunLogBudget {
    pub(crate) fn new(limits: &Limits) -> Self {
        RunLogBudget { records_left: limits.run_log_records, bytes_left: limits.run_log_bytes, spent_noted: false }
    }
}

/// One call's log allowance and what it used and dropped.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LogBudget {
    limits: Limits,
    run: RunLogBudget,
    records_used: u64,
    bytes_used: u64,
    records_dropped: u64,
    bytes_dropped: u64,
    /// Some record was dropped because the run's budget, not the call's, was reached.
    run_bound: bool,
}

impl LogBudget {
    /// The allowance of one call, given what the run leaves.
    pub(crate) fn for_call(limits: &Limits, run: RunLogBudget) -> Self {
        LogBudget {
            limits: *limits,
            run,
            records_used: 0,
            bytes_used: 0,
            records_dropped: 0,
            bytes_dropped: 0,
            run_bound: false,
        }
    }

    /// An allowance that admits everything (a failed call's stderr, which goes
    /// into the failure's message, capped there, not into the log).
    pub(crate) fn unlimited() -> Self {
        let limits = Limits {
            max_log_records: u64::MAX,
            run_log_records: u64::MAX,
            run_log_bytes: u64::MAX,
            ..Limits::default()
        };
        LogBudget::for_call(&limits, RunLogBudget::new(&limits))
    }

    /// Admits one record of `bytes` bytes of text, or counts it as dropped.
    pub(crate) fn admit(&mut self, bytes: usize) -> bool {
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        let run_full =
            self.records_used >= self.run.records_left || self.bytes_used.saturating_add(bytes) > self.run.bytes_left;
        let call_full = self.records_used >= self.limits.max_log_records;
        if run_full || call_full {
            self.records_dropped += 1;
            self.bytes_dropped = self.bytes_dropped.saturating_add(bytes);
            self.run_bound |= run_full;
            return false;
        }
        self.records_used += 1;
        self.bytes_used += bytes;
        true
    }

    /// Counts bytes dropped elsewhere (a `log` message over `max_log_bytes`) as one dropped record.
    pub(crate) fn drop_record(&mut self, bytes: usize) {
        self.records_dropped += 1;
        self.bytes_dropped = self.bytes_dropped.saturating_add(u64::try_from(bytes).unwrap_or(u64::MAX));
    }

    /// What the run has left after this call, and the note for what this call
    /// dropped: one per call while the run's budget lasts, then one saying it
    /// is spent, then none.
    pub(crate) fn finish(self) -> (RunLogBudget, Option<String>) {
        let mut run = self.run;
        run.records_left = run.records_left.saturating_sub(self.records_used);
        run.bytes_left = run.bytes_left.saturating_sub(self.bytes_used);
        if self.records_dropped == 0 || run.spent_noted {
            return (run, None);
        }
        let (n, b) = (self.records_dropped, self.bytes_dropped);
        let note = if self.run_bound {
            run.spent_noted = true;
            format!(
                "[hookbox] {n} log records ({b} bytes) dropped: the run's log budget is spent \
                 (run_log_records = {}, run_log_bytes = {}); this plugin's log output is dropped \
                 for the rest of the run",
                self.limits.run_log_records, self.limits.run_log_bytes
            )
        } else {
            format!(
                "[hookbox] {n} log records ({b} bytes) dropped: over max_log_records = {} or \
                 max_log_bytes = {} for this call",
                self.limits.max_log_records, self.limits.max_log_bytes
            )
        };
        (run, Some(note))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(call: u64, run: u64) -> Limits {
        Limits { max_log_records: call, run_log_records: run, run_log_bytes: 100, ..Limits::default() }
    }

    #[test]
    fn a_call_keeps_its_first_records_and_notes_the_rest() {
        let l = limits(3, 100);
        let mut b = LogBudget::for_call(&l, RunLogBudget::new(&l));
        let kept: Vec<bool> = (0..5).map(|_| b.admit(0)).collect();
        assert_eq!(kept, [true, true, true, false, false]);
        let (run, note) = b.finish();
        assert_eq!(run.records_left, 97);
        let note = note.expect("a note");
        assert!(note.contains("2 log records (0 bytes) dropped") && note.contains("max_log_records = 3"), "{note}");
    }

    #[test]
    fn the_run_budget_counts_records_and_bytes_and_is_noted_once() {
        let l = limits(1_000, 4);
        let mut b = LogBudget::for_call(&l, RunLogBudget::new(&l));
        assert!((0..4).all(|_| b.admit(10)));
        assert!(!b.admit(0));
        let (run, note) = b.finish();
        assert!(note.is_some_and(|n| n.contains("run_log_records = 4")));
        let mut b = LogBudget::for_call(&l, run);
        assert!(!b.admit(0));
        assert_eq!(b.finish().1, None, "noted once per run");
        // Bytes: 100 per run.
        let l = limits(1_000, 1_000);
        let mut b = LogBudget::for_call(&l, RunLogBudget::new(&l));
        assert!(b.admit(60));
        assert!(!b.admit(60));
        assert!(b.admit(40));
        let (run, note) = b.finish();
        assert_eq!((run.records_left, run.bytes_left), (998, 0));
        assert!(note.is_some_and(|n| n.contains("run_log_bytes = 100")));
    }

    #[test]
    fn nothing_dropped_is_no_note() {
        let l = Limits::default();
        let mut b = LogBudget::for_call(&l, RunLogBudget::new(&l));
        assert!(b.admit(5));
        assert_eq!(b.finish().1, None);
    }
}
