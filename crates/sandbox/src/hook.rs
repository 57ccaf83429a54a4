//! [`WasmHook`]: one plugin's handler for one run. Its store and instance
//! are created on the first event and reused; a failed call drops them.
//! Each call is armed with the plugin's fuel and deadline (cut to what the
//! run budgets leave), its output validated, its staged state committed only
//! when it succeeded in every way; failures feed the crash-loop breaker.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hookbox_contract::{
    Directive, Event, EventContext, EventKind, FailureKind, HookFailure, HookLog, SuspendReason, Suspension,
    truncate_chars,
};
use wasmtime::component::ResourceTable;
use wasmtime::{Store, UpdateDeadline};

use crate::call::{Allowance, CallError, arm, classify, drain_pipe, with_backstop};
use crate::ctx::{HookCtx, Limiter, StateSource};
use crate::env::HostEnv;
use crate::error::LoadError;
use crate::handler::{HookHandler, HookReply};
use crate::instance::HookInstance;
use crate::log::{LogBudget, RunLogBudget};
use crate::options::{FAIL_CLOSED_MESSAGE, FailPolicy};
use crate::output::CappedPipe;
use crate::plugin::WasmPlugin;
use crate::reply::check_directive;
use crate::state::{Revision, StoredState};

/// Fuel per slice handed to compiled code (see [`WasmHook::instantiate`]):
/// about a millisecond of guest work. A call stopped by its deadline is
/// charged the fuel counted plus one slice, the most that can go uncounted.
pub(crate) const FUEL_SLICE: u64 = 1_000_000;

/// A live instance: its store, the instance, and the captured output pipes.
pub(crate) struct Live {
    pub(crate) store: Store<HookCtx>,
    pub(crate) hook: HookInstance,
    pub(crate) stdout: CappedPipe,
    pub(crate) stderr: CappedPipe,
    /// The state revision this instance last read or wrote: its next commit
    /// succeeds only if the store is still there (`crate::state`).
    pub(crate) revision: Option<Revision>,
    /// Why the last call's `get-state` could not read the store, if it could not.
    pub(crate) read_error: Option<String>,
}

/// One plugin's handler for one run (see the module docs for the lifecycle).
pub struct WasmHook {
    pub(crate) plugin: Arc<WasmPlugin>,
    pub(crate) live: Option<Live>,
    pub(crate) fuel_spent: u64,
    pub(crate) time_spent: Duration,
    pub(crate) recent_failures: VecDeque<Instant>,
    pub(crate) suspended: Option<SuspendReason>,
    /// The session this run belongs to (from its `run-start`), which keys the state.
    pub(crate) session: Option<Arc<str>>,
    /// State saved by a handler that saw no `run-start` (a conformance trace):
    /// kept in the handler only, since there is no session to key it by.
    pub(crate) committed: Option<StoredState>,
    /// What the last call staged, committed once its directive is validated.
    pub(crate) staged: Option<Vec<u8>>,
    /// Where this plugin's nondeterministic inputs come from (a run's journal), if set.
    pub(crate) env: Option<Arc<dyn HostEnv>>,
    /// What the plugin may still log in this run.
    pub(crate) run_log: RunLogBudget,
    /// True when the last commit lost a race: another run of the session saved first.
    pub(crate) conflicted: bool,
}

/// How many times a call whose state save lost a race to another run of
/// the session is made again, on a fresh instance that reads the state the
/// winner saved (optimistic concurrency), before the conflict is reported.
pub const STATE_CONFLICT_RETRIES: u32 = 3;

impl WasmHook {
    /// Takes this hook's nondeterministic inputs (`now`, `random`, `uuid`,
    /// `sleep`, `get-state`, WASI's clocks and random numbers) from `env`
    /// instead of live sources: a run's journal records or replays them.
    pub fn with_host_env(mut self, env: Arc<dyn HostEnv>) -> Self {
        self.env = Some(env);
        self
    }
}

impl WasmHook {
    /// Creates a fresh store and instance. Takes the plugin, not `&self`, so the
    /// future holds no reference to the (non-`Sync`) live store.
    pub(crate) async fn instantiate(
        p: Arc<WasmPlugin>,
        allowance: Allowance,
        env: Option<Arc<dyn HostEnv>>,
    ) -> Result<Live, CallError> {
        let limits = &p.options.limits;
        let log_cap = usize::try_from(limits.max_log_bytes).unwrap_or(usize::MAX);
        let stdout = CappedPipe::new(log_cap);
        let stderr = CappedPipe::new(log_cap);
        let wasi = p
            .wasi_ctx(&stdout, &stderr, env.as_ref())
            .map_err(|message| CallError { kind: FailureKind::Instantiate, message })?;
        let ctx = HookCtx {
            wasi,
            table: ResourceTable::new(),
            limiter: Limiter {
                max_memory: usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX),
                memory_refused: false,
            },
            plugin: Arc::from(p.name.as_str()),
            config: p.config.clone(),
            logs: Vec::new(),
            log_bytes: 0,
            log_cap,
            log_budget: LogBudget::for_call(limits, RunLogBudget::new(limits)),
            state_source: StateSource::Fixed(None),
            state_read: None,
            staged: None,
            env,
            deadline: Instant::now(),
        };
        let mut store = Store::new(&p.engine, ctx);
        store.limiter(|c| &mut c.limiter);
        // Fuel is handed to compiled code in slices: wasmtime keeps the count of
        // the running slice in a register and loses it when the epoch interrupts
        // the code, so a call stopped by its deadline is undercounted by at most
        // one slice (without slices: by everything since its last call). The
        // call also yields to the executor between slices.
        store
            .fuel_async_yield_interval(Some(FUEL_SLICE))
            .map_err(|e| CallError { kind: FailureKind::Instantiate, message: e.to_string() })?;
        // Set once per store: each call only moves `deadline` (no allocation per call).
        store.epoch_deadline_callback(|ctx| {
            Ok(if Instant::now() >= ctx.data().deadline { UpdateDeadline::Interrupt } else { UpdateDeadline::Yield(1) })
        });
        arm(&mut store, allowance).map_err(|e| classify(&store, e))?;
        let hook = p.pre.instantiate_async(&mut store).await.map_err(|e| {
            let err = classify(&store, e);
            CallError {
                kind: FailureKind::Instantiate,
                message: match err.kind {
                    FailureKind::Trap if err.message.contains("concurrent limit") => format!(
                        "instantiation failed: {}: the instance pool is full (raise [runtime] max_instances)",
                        err.message
                    ),
                    FailureKind::Trap => format!("instantiation failed: {}", err.message),
                    kind => format!("instantiation failed ({}): {}", kind.as_str(), err.message),
                },
            }
        })?;
        Ok(Live { store, hook, stdout, stderr, revision: None, read_error: None })
    }

    /// What the next call may use: the per-call limits, cut to what the run budgets leave.
    pub(crate) fn allowance(&self) -> Allowance {
        let limits = &self.plugin.options.limits;
        let mut fuel = limits.fuel;
        if let Some(budget) = limits.run_fuel {
            fuel = fuel.min(budget.saturating_sub(self.fuel_spent));
        }
        let mut deadline = Duration::from_millis(limits.deadline_ms);
        if let Some(budget) = limits.run_time_ms {
            deadline = deadline.min(Duration::from_millis(budget).saturating_sub(self.time_spent));
        }
        Allowance { fuel, deadline }
    }

    pub(crate) async fn call(
        &mut self,
        event: &Event,
        context: &EventContext,
        allowance: Allowance,
    ) -> (Result<Directive, CallError>, u64, Vec<HookLog>) {
        if self.live.is_none() {
            match Self::instantiate(self.plugin.clone(), allowance, self.env.clone()).await {
                Ok(live) => self.live = Some(live),
                Err(e) => return (Err(e), 0, Vec::new()),
            }
        }
        let Some(live) = self.live.as_mut() else {
            return (Err(CallError { kind: FailureKind::Instantiate, message: "no instance".into() }), 0, Vec::new());
        };
        {
            let ctx = live.store.data_mut();
            ctx.state_source = match &self.session {
                Some(session) => StateSource::Store { store: self.plugin.state.clone(), session: session.clone() },
                None => StateSource::Fixed(self.committed.clone()),
            };
            ctx.state_read = None;
            ctx.staged = None;
            ctx.log_budget = LogBudget::for_call(&self.plugin.options.limits, self.run_log);
        }
        let armed = arm(&mut live.store, allowance);
        // The epoch callback bounds guest code; this timeout bounds everything
        // else (a host call that blocks), with a small grace over the deadline.
        let backstop = allowance.deadline + (allowance.deadline / 4).max(Duration::from_millis(5));
        let mut interrupted = false;
        let outcome = match armed {
            Err(e) => Err(classify(&live.store, e)),
            Ok(()) => match with_backstop(live.hook.call_on_event(&mut live.store, event, context), backstop).await {
                Some(Ok(d)) => Ok(d),
                Some(Err(e)) => {
                    interrupted = e.downcast_ref::<wasmtime::Trap>() == Some(&wasmtime::Trap::Interrupt);
                    Err(classify(&live.store, e))
                }
                None => Err(CallError {
                    kind: FailureKind::Deadline,
                    message: format!(
                        "the call did not return within its {} ms deadline (blocked in a host call)",
                        allowance.deadline.as_millis()
                    ),
                }),
            },
        };
        let mut fuel_used = allowance.fuel.saturating_sub(live.store.get_fuel().unwrap_or(0));
        if interrupted {
            // The running slice's count is lost when the epoch interrupts; charge it whole.
            fuel_used = fuel_used.saturating_add(FUEL_SLICE).min(allowance.fuel);
        }
        let ctx = live.store.data_mut();
        let mut logs = ctx.take_logs();
        let plugin = self.plugin.name.as_str();
        drain_pipe(plugin, "stdout", &live.stdout, &mut ctx.log_budget, &mut logs);
        // On a failure the guest's stderr (a panic message) goes into the failure, not the log.
        let mut stderr_logs = Vec::new();
        let stderr_text = if outcome.is_ok() {
            drain_pipe(plugin, "stderr", &live.stderr, &mut ctx.log_budget, &mut logs)
        } else {
            drain_pipe(plugin, "stderr", &live.stderr, &mut LogBudget::unlimited(), &mut stderr_logs)
        };
        let (run_log, note) = ctx.log_budget.finish();
        self.run_log = run_log;
        if let Some(message) = note {
            tracing::warn!(plugin, "{message}");
            logs.push(HookLog { plugin: plugin.to_string(), level: "warn".into(), message });
        }
        let outcome = outcome.map_err(|mut e| {
            if !stderr_text.trim().is_empty() {
                e.message = format!("{}; stderr: {}", e.message, truncate_chars(stderr_text.trim(), 2_000));
            }
            e
        });
        self.staged = live.store.data_mut().staged.take();
        let read = live.store.data_mut().state_read.take();
        live.read_error = read.as_ref().and_then(|r| r.error.clone());
        if let Some(revision) = read.and_then(|r| r.revision) {
            live.revision = Some(revision);
        }
        if outcome.is_err() {
            // A store is poisoned after a trap and unusable after a cancelled call:
            // never enter it again.
            self.live = None;
        }
        (outcome, fuel_used, logs)
    }

    /// Records a failure for the breaker; returns the suspension if it tripped.
    pub(crate) fn note_failure(&mut self, now: Instant) -> Option<SuspendReason> {
        let breaker = self.plugin.options.breaker;
        if breaker.failures == 0 {
            return None;
        }
        let window = Duration::from_millis(breaker.window_ms);
        self.recent_failures.push_back(now);
        while self.recent_failures.front().is_some_and(|t| now.duration_since(*t) > window) {
            self.recent_failures.pop_front();
        }
        (self.recent_failures.len() >= breaker.failures as usize).then_some(SuspendReason::CrashLoop)
    }

    /// Checks the run budgets after a call; returns the suspension if one is spent.
    pub(crate) fn budget_spent(&self) -> Option<SuspendReason> {
        let limits = &self.plugin.options.limits;
        let fuel_out = limits.run_fuel.is_some_and(|b| self.fuel_spent >= b);
        let time_out = limits.run_time_ms.is_some_and(|b| self.time_spent >= Duration::from_millis(b));
        (fuel_out || time_out).then_some(SuspendReason::Budget)
    }

    pub(crate) fn suspension_message(&self, reason: SuspendReason) -> String {
        let o = &self.plugin.options;
        match reason {
            SuspendReason::CrashLoop => format!(
                "quarantined for the rest of the run: {} failures within {} ms",
                o.breaker.failures, o.breaker.window_ms
            ),
            SuspendReason::Budget => format!(
                "skipped for the rest of the run: run budget spent (fuel {} of {:?}, time {} ms of {:?})",
                self.fuel_spent,
                o.limits.run_fuel,
                self.time_spent.as_millis(),
                o.limits.run_time_ms
            ),
        }
    }
}

/// Runs `fut` (an instantiation) to completion on a fresh current-thread runtime.
/// `Err(Some(message))` is a failed instantiation, `Err(None)` a runtime that could not start.
pub(crate) fn block_on_fresh(
    fut: impl std::future::Future<Output = Result<Live, CallError>>,
) -> Result<(), Option<String>> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().map_err(|e| Some(e.to_string()))?;
    rt.block_on(fut).map(drop).map_err(|e| Some(e.message))
}

#[async_trait::async_trait]
impl HookHandler for WasmHook {
    fn name(&self) -> &str {
        &self.plugin.name
    }

    fn fail_policy(&self) -> FailPolicy {
        self.plugin.options.fail
    }

    fn subscribed(&self, kind: EventKind) -> bool {
        self.plugin.subscribed[kind.index()]
    }

    fn observe_only(&self) -> bool {
        self.plugin.options.observe
    }

    fn run_started(&mut self, session_id: &str) {
        if self.session.as_deref() != Some(session_id) {
            if self.session.is_some() {
                // Another session: a fresh instance, so nothing the guest kept in
                // memory (globals, heap) crosses from one session to the next.
                self.live = None;
            }
            self.session = Some(Arc::from(session_id));
            self.committed = None;
        }
    }

    async fn on_event(&mut self, event: &Event, context: &EventContext) -> HookReply {
        if !self.plugin.subscribed[event.kind().index()] {
            // Not subscribed: never entered (the chain does not even call this).
            return HookReply {
                outcome: Ok(Directive::Continue),
                logs: Vec::new(),
                suspension: None,
                fuel_used: 0,
                duration_us: 0,
            };
        }
        if self.suspended.is_some() {
            // A suspended fail-closed guard keeps declining tools.
            let outcome = if self.plugin.options.fail == FailPolicy::Closed && event.kind() == EventKind::BeforeToolCall
            {
                Directive::SkipTool(Some(FAIL_CLOSED_MESSAGE.to_string()))
            } else {
                Directive::Continue
            };
            return HookReply {
                outcome: Ok(outcome),
                logs: Vec::new(),
                suspension: None,
                fuel_used: 0,
                duration_us: 0,
            };
        }
        if let Event::RunStart { session_id, .. } = event {
            // Also when the hook is driven directly (a conformance trace), not by a chain.
            self.run_started(session_id);
        }
        if let Some(env) = &self.env {
            env.begin_call();
        }
        let (mut attempt, mut fuel_used, mut duration_us) = (0, 0u64, 0u64);
        let (outcome, logs) = loop {
            let allowance = self.allowance();
            let started = Instant::now();
            let (outcome, fuel, logs) = self.call(event, context, allowance).await;
            let elapsed = started.elapsed();
            self.fuel_spent = self.fuel_spent.saturating_add(fuel);
            self.time_spent += elapsed;
            fuel_used = fuel_used.saturating_add(fuel);
            duration_us = duration_us.saturating_add(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX));
            let staged = self.staged.take();
            let limits = &self.plugin.options.limits;
            // State is committed only for a call that succeeded in every way; the
            // store is waited for only until the call's deadline.
            let deadline = started + allowance.deadline;
            self.conflicted = false;
            let outcome = outcome
                .and_then(|d| {
                    // Checked as lifted, before anything copies or records it.
                    check_directive(d, limits)
                        .map_err(|e| CallError { kind: FailureKind::InvalidOutput, message: e.message })
                })
                .and_then(|d| self.commit_state(staged, deadline).map(|()| d));
            // Lost a race to another run of the session: again, from the state it
            // saved. Not on replay, where the journal gives every value once.
            let again = self.conflicted
                && self.env.is_none()
                && attempt < STATE_CONFLICT_RETRIES
                && self.budget_spent().is_none();
            if !again {
                break (outcome, logs);
            }
            attempt += 1;
            self.live = None;
        };
        let outcome = outcome.map_err(|e| {
            tracing::warn!(plugin = %self.plugin.name, event = %event.kind(), kind = e.kind.as_str(), "hook failed: {}", e.message);
            HookFailure {
                plugin: self.plugin.name.clone(),
                event: event.kind().to_string(),
                kind: e.kind,
                message: e.message,
                fuel_used,
                duration_us,
            }
        });
        if outcome.is_err() {
            // Whatever failed, the next call starts from a fresh instance and the committed state.
            self.live = None;
        }
        if let Some(env) = &self.env {
            let known = self.live.as_ref().and_then(|l| l.revision);
            let revision = env.call_ended(known);
            if let Some(live) = self.live.as_mut() {
                live.revision = revision;
            }
        }
        // A `state` failure is the store failing or contention between runs, not
        // the plugin: it does not count towards quarantine (a database outage
        // must not suspend every plugin that keeps state for the rest of a run).
        let plugin_failed = outcome.as_ref().is_err_and(|f| f.kind != FailureKind::State);
        let tripped = if plugin_failed { self.note_failure(Instant::now()) } else { None };
        let suspension = tripped.or_else(|| self.budget_spent()).map(|reason| {
            self.suspended = Some(reason);
            self.live = None;
            let message = self.suspension_message(reason);
            tracing::warn!(plugin = %self.plugin.name, "{message}");
            Suspension { plugin: self.plugin.name.clone(), event: event.kind().to_string(), reason, message }
        });
        HookReply { outcome, logs, suspension, fuel_used, duration_us: duration_us.max(1) }
    }
}

impl WasmPlugin {
    /// A handler for one run; the instance is created on its first event.
    pub fn hook(self: &Arc<Self>) -> WasmHook {
        WasmHook {
            plugin: self.clone(),
            live: None,
            fuel_spent: 0,
            time_spent: Duration::ZERO,
            recent_failures: VecDeque::new(),
            suspended: None,
            session: None,
            committed: None,
            staged: None,
            env: None,
            run_log: RunLogBudget::new(&self.options.limits),
            conflicted: false,
        }
    }

    /// Instantiates once, at load, so limits too small to start the plugin (or a
    /// grant that cannot be opened) are a load error, not a failure on every event.
    /// Runs no guest code beyond the component's start functions.
    pub(crate) fn trial_instantiate(&self) -> Result<(), LoadError> {
        let limits = self.options.limits;
        let allowance = Allowance { fuel: limits.fuel, deadline: Duration::from_millis(limits.deadline_ms) };
        let fut = WasmHook::instantiate(Arc::new(self.clone_for_trial()), allowance, None);
        // Loading is synchronous; a small current-thread runtime drives the async instantiation.
        let result = match tokio::runtime::Handle::try_current() {
            Ok(_) => std::thread::scope(|s| s.spawn(|| block_on_fresh(fut)).join().unwrap_or(Err(None))),
            Err(_) => block_on_fresh(fut),
        };
        match result {
            Ok(()) => Ok(()),
            Err(message) => Err(LoadError::Options {
                plugin: self.name.clone(),
                message: message.unwrap_or_else(|| "the trial instantiation panicked".into()),
            }),
        }
    }
}
