//! `budget-guard`: aborts the run as soon as what it has cost passes a budget.
//! It adds up the cost of every model response (`model-response` carries what
//! that one request billed) and returns `abort` at the response that crosses
//! `max_cost_usd`, before any of its tool calls run. The total restarts at
//! every `run-start`.
//!
//! Config: `max_cost_usd` (a number, required). An unreadable value panics at
//! the first event, so the host records the misconfiguration as a failure.

use hookbox_sdk::{Directive, Hook, ModelResponse, RunStart, config, directive, export_hook};

/// Running cost against a budget; pure so it can be tested natively.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    max: f64,
    spent: f64,
}

impl Budget {
    /// A budget of `max` US dollars.
    pub fn new(max: f64) -> Self {
        Budget { max, spent: 0.0 }
    }

    /// Adds one request's cost; returns the total when it passed the budget.
    pub fn add(&mut self, cost: f64) -> Option<f64> {
        self.spent += cost;
        (self.spent > self.max).then_some(self.spent)
    }

    /// Starts a new run.
    pub fn reset(&mut self) {
        self.spent = 0.0;
    }
}

/// Reads `max_cost_usd`.
pub fn parse_max(raw: Option<&str>) -> Result<f64, String> {
    let raw = raw.ok_or("budget-guard: config `max_cost_usd` is required")?;
    match raw.trim_matches('"').parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("budget-guard: `max_cost_usd` must be a non-negative number, got `{raw}`")),
    }
}

struct BudgetGuard {
    budget: Budget,
}

impl Hook for BudgetGuard {
    fn new() -> Self {
        let max = parse_max(config::get("max_cost_usd").as_deref()).unwrap_or_else(|e| panic!("{e}"));
        BudgetGuard { budget: Budget::new(max) }
    }

    fn run_start(&mut self, _event: &RunStart) -> Directive {
        self.budget.reset();
        Directive::Continue
    }

    fn model_response(&mut self, event: &ModelResponse) -> Directive {
        let cost = event.usage.as_ref().map_or(0.0, |u| u.cost_usd);
        match self.budget.add(cost) {
            Some(spent) => directive::abort(format!(
                "budget-guard: the run has cost ${spent:.6}, over its budget of ${:.6}",
                self.budget.max
            )),
            None => Directive::Continue,
        }
    }
}

export_hook!(BudgetGuard);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aborts_when_the_total_passes() {
        let mut b = Budget::new(0.001);
        assert_eq!(b.add(0.0006), None);
        assert!(b.add(0.0006).is_some());
        b.reset();
        assert_eq!(b.add(0.0006), None);
        assert_eq!(parse_max(Some("0.5")), Ok(0.5));
        assert!(parse_max(None).is_err());
        assert!(parse_max(Some("-1")).is_err());
    }
}
