//! Issue 17, the append-only journal of a live run on PostgreSQL, at the
//! store: a safe point stores the whole checkpoint or appends a part to it;
//! the worker that takes the run over after its worker died reads it back
//! whole, parts applied in order (a part stored twice by a retried write
//! counts once; one that does not follow its base fails the resume rather
//! than resuming it wrong); a whole checkpoint, a park or the run's end
//! forgets the parts; and a queued run whose worker died before its first
//! safe point is queued again (the `started` column). Runs under
//! `scripts/with-postgres.sh` (skipped without it; a failure with
//! `HOOKBOX_REQUIRE_POSTGRES=1`).

use hookbox_server::{Checkpointed, Claim, PostgresServerStore, ServerStore, StoreError};
use hookbox_tests::postgres::{database, query_text, run_row, sql};
use serde_json::{Value, json};

/// A live run's whole checkpoint (`ParkedRun`) with `started` tool calls.
fn whole(run_id: &str, started: &[&str]) -> String {
    json!({
        "spec": {"prompt": "p", "system": null, "model": "replay", "plugins": [], "session_key": "acme:s"},
        "checkpoint": {"run_id": run_id, "turn": 1, "responses": [], "tools": [], "imports": {}, "calls": [],
            "approvals": [], "deliveries": [], "begun": {}, "started": started, "pending": {}, "pauses": 0},
        "approval": null, "workspace": [], "abort": null, "paused": false, "counted_usd": 0.0,
        "queued": false, "inbox": []
    })
    .to_string()
}

/// A journal part adding `started` to a checkpoint with `at` started calls, with `inbox`.
fn part(at: u64, started: &[&str], inbox: &[&str]) -> String {
    json!({
        "at": {"responses": 0, "tools": 0, "imports": {}, "calls": 0, "approvals": 0, "deliveries": 0, "started": at},
        "responses": [], "tools": [], "imports": {}, "calls": [], "approvals": [], "deliveries": [],
        "started": started, "run_id": "j1", "turn": 1, "begun": {}, "pending": {}, "pauses": 0, "abort": null,
        "inbox": inbox, "workspace": null
    })
    .to_string()
}

fn event(seq: i64) -> hookbox_server::RunEventRow {
    hookbox_server::RunEventRow { seq, name: "event".into(), data: format!("{{\"n\":{seq}}}") }
}

fn count(url: &str, query: &str) -> i64 {
    query_text(url, format!("SELECT count(*)::TEXT FROM ({query}) q"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{query}"))
}

/// Makes `store`'s worker dead (its lease lapsed) and has `by` sweep its runs.
fn kill(url: &str, store: &PostgresServerStore, by: &PostgresServerStore) -> usize {
    sql(url, format!("UPDATE workers SET lease_until_ms = 0 WHERE id = '{}'", store.worker()));
    by.sweep_dead_workers().unwrap_or_else(|e| panic!("{e}"))
}

fn claimed(store: &PostgresServerStore, run_id: &str) -> (String, bool, Claim) {
    let c = store
        .claim_resumable(Some(run_id))
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("{run_id} not claimed"));
    (c.parked, c.queued, c.claim)
}

#[test]
fn a_live_runs_journal_is_appended_and_read_back_whole_by_the_worker_that_takes_it_over() {
    let Some(url) = database() else { return };
    let open = || PostgresServerStore::open(&url).unwrap_or_else(|e| panic!("open: {e}"));
    let (a, b, c) = (open(), open(), open());
    for s in [&a, &b, &c] {
        s.heartbeat(60_000).unwrap_or_else(|e| panic!("{e}"));
    }
    let quotas = hookbox_server::Quotas::default();
    let tenant = a.create_tenant("acme", &quotas).unwrap_or_else(|e| panic!("{e}")).id;
    a.add_run(tenant, &run_row("j1")).unwrap_or_else(|e| panic!("{e}"));
    let save = |(s, claim): (&PostgresServerStore, Claim), what: Checkpointed<'_>, seq: i64| {
        s.save_checkpoint(("j1", claim), what, &[event(seq)], seq).unwrap_or_else(|e| panic!("{e}"));
    };
    let a1 = (&a, Claim::FIRST);
    let parts = || count(&url, "SELECT 1 FROM run_journal WHERE run_id = 'j1'");

    // A's run: whole, then two parts; the first part is stored twice (a retry).
    save(a1, Checkpointed::Whole(&whole("j1", &[])), 1);
    let (p1, p2) = (part(0, &["t1"], &[]), part(1, &["t2"], &["hi"]));
    save(a1, Checkpointed::Part { number: 1, text: &p1 }, 2);
    save(a1, Checkpointed::Part { number: 1, text: &p1 }, 2);
    save(a1, Checkpointed::Part { number: 2, text: &p2 }, 3);
    assert_eq!(parts(), 2);
    assert_eq!(query_text(&url, "SELECT safe_seq::TEXT FROM runs WHERE id = 'j1'".into()).as_deref(), Some("3"));

    // A dies; B takes the run over and reads it back whole.
    assert_eq!(kill(&url, &a, &b), 1);
    let (text, queued, claim) = claimed(&b, "j1");
    assert!(!queued);
    assert_eq!(claim, Claim(2), "the run's second claim");
    let b2 = (&b, claim);
    let run: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(run["checkpoint"]["started"], json!(["t1", "t2"]), "{text}");
    assert_eq!(run["inbox"], json!(["hi"]));
    // A, whose run it no longer is, cannot append to it.
    let late =
        a.save_checkpoint(("j1", Claim::FIRST), Checkpointed::Part { number: 3, text: &part(2, &["t3"], &[]) }, &[], 3);
    assert!(matches!(late, Err(StoreError::Fenced(_))), "{late:?}");
    assert_eq!(parts(), 2);

    // B's first safe point is whole: the parts go. Then a part that does not
    // follow its base (it says 5 calls started, the base has 1).
    save(b2, Checkpointed::Whole(&whole("j1", &["t1"])), 3);
    assert_eq!(parts(), 0);
    // The store takes a part only after the whole and parts 1 to its number - 1.
    let refused = |r: Result<(), StoreError>| matches!(r, Err(StoreError::Unavailable(_)));
    let gap = Checkpointed::Part { number: 2, text: &p1 };
    assert!(refused(b.save_checkpoint(("j1", b2.1), gap, &[], 3)), "a part after a gap");
    let bad = part(5, &["t9"], &[]);
    save(b2, Checkpointed::Part { number: 1, text: &bad }, 4);
    save(b2, Checkpointed::Part { number: 1, text: &bad }, 4);
    let other = Checkpointed::Part { number: 1, text: &p1 };
    assert!(refused(b.save_checkpoint(("j1", b2.1), other, &[], 4)), "another text under a stored number");
    assert_eq!(parts(), 1);
    assert_eq!(kill(&url, &b, &c), 1);
    let (text, _, claim) = claimed(&c, "j1");
    let c3 = (&c, claim);
    assert_eq!(text, "", "a checkpoint that cannot be put together is not resumed wrong");

    // Forgetting the checkpoint forgets its parts; so does the run's end.
    save(c3, Checkpointed::Whole(&whole("j1", &["t1"])), 5);
    save(c3, Checkpointed::Part { number: 1, text: &part(1, &["t2"], &[]) }, 6);
    assert_eq!(parts(), 1);
    save(c3, Checkpointed::Forget, 6);
    assert_eq!(parts(), 0);
    assert_eq!(query_text(&url, "SELECT checkpoint FROM runs WHERE id = 'j1'".into()), None);
    let no_base = Checkpointed::Part { number: 1, text: &p1 };
    assert!(refused(c.save_checkpoint(("j1", c3.1), no_base, &[], 6)), "a part with no whole checkpoint");
    save(c3, Checkpointed::Whole(&whole("j1", &["t1"])), 6);
    save(c3, Checkpointed::Part { number: 1, text: &part(1, &["t2"], &[]) }, 7);
    c.finish_run("j1", c3.1, "completed", None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(parts(), 0);

    // A queued run claimed by a worker that dies before its first safe point
    // is queued again; once it wrote one, it is resumable.
    let queued = hookbox_server::RunRow { status: "queued".into(), ..run_row("q1") };
    let started = |s: &PostgresServerStore| s.queue_run(tenant, &queued, &whole("q1", &[]), &event(1), 10);
    assert!(started(&c).unwrap_or_else(|e| panic!("{e}")));
    let d = open();
    d.heartbeat(60_000).unwrap_or_else(|e| panic!("{e}"));
    let (_, was_queued, _) = claimed(&c, "q1");
    assert!(was_queued);
    kill(&url, &c, &d);
    let status = || query_text(&url, "SELECT status FROM runs WHERE id = 'q1'".into());
    assert_eq!(status().as_deref(), Some("queued"));
    let (_, _, claim) = claimed(&d, "q1");
    d.save_checkpoint(("q1", claim), Checkpointed::Whole(&whole("q1", &["t1"])), &[event(2)], 2)
        .unwrap_or_else(|e| panic!("{e}"));
    let e = open();
    e.heartbeat(60_000).unwrap_or_else(|e| panic!("{e}"));
    kill(&url, &d, &e);
    assert_eq!(status().as_deref(), Some("resumable"));
}

/// Fencing by claim (issue 17 item 5): a worker whose lease lapsed and
/// that took its run back (a second claim) still has the first claim's
/// task until it notices: that task's writes are refused, every one, and
/// only the second claim's land.
#[test]
fn a_write_of_an_earlier_claim_is_fenced_even_on_the_same_worker() {
    let Some(url) = database() else { return };
    let open = || PostgresServerStore::open(&url).unwrap_or_else(|e| panic!("open: {e}"));
    let (a, b) = (open(), open());
    for s in [&a, &b] {
        s.heartbeat(60_000).unwrap_or_else(|e| panic!("{e}"));
    }
    let tenant = a.create_tenant("fenced", &hookbox_server::Quotas::default()).unwrap_or_else(|e| panic!("{e}")).id;
    a.add_run(tenant, &run_row("f1")).unwrap_or_else(|e| panic!("{e}"));
    let first = ("f1", Claim::FIRST);
    a.save_checkpoint(first, Checkpointed::Whole(&whole("f1", &[])), &[event(1)], 1).unwrap_or_else(|e| panic!("{e}"));
    // A's lease lapses, B sweeps, and A (alive after all) takes the run back.
    assert_eq!(kill(&url, &a, &b), 1);
    assert!(!a.heartbeat(60_000).unwrap_or_else(|e| panic!("{e}")), "A's lease was swept");
    let (_, _, claim) = claimed(&a, "f1");
    assert_eq!(claim, Claim(2));
    let second = ("f1", claim);

    // The first claim's task writes nothing: not a safe point, an event, an
    // approval, a park, a status, a release or the run's end.
    let fenced = |r: Result<(), StoreError>| matches!(r, Err(StoreError::Fenced(_)));
    let part = Checkpointed::Part { number: 1, text: &part(0, &["t1"], &[]) };
    assert!(fenced(a.save_checkpoint(first, part, &[event(2)], 2)), "a safe point");
    assert!(fenced(a.save_checkpoint(first, Checkpointed::Whole(&whole("f1", &["t1"])), &[], 2)));
    assert!(fenced(a.add_run_events("f1", Claim::FIRST, &[event(2)])), "an event");
    assert!(fenced(a.add_approval(tenant, first, "f1/c1", &json!({"tool": "create_file"}))), "an approval");
    let row = hookbox_server::ParkRow {
        events: &[],
        checkpoint: &whole("f1", &[]),
        approval: None,
        max_parked: 10,
        spend: None,
    };
    assert!(matches!(a.park_run(tenant, first, &row), Err(StoreError::Fenced(_))), "a park");
    a.set_run_status("f1", Claim::FIRST, "paused").unwrap_or_else(|e| panic!("{e}"));
    a.release_claim("f1", Claim::FIRST, false).unwrap_or_else(|e| panic!("{e}"));
    assert!(fenced(a.finish_run("f1", Claim::FIRST, "completed", None)), "the run's end");
    let row_now = || {
        query_text(
            &url,
            "SELECT concat_ws(' ', status, claim, (SELECT count(*) FROM run_events WHERE run_id = 'f1'),
                 (SELECT count(*) FROM approvals WHERE run_id = 'f1'), checkpoint LIKE '%t1%')
             FROM runs WHERE id = 'f1'"
                .into(),
        )
    };
    assert_eq!(row_now().as_deref(), Some("running 2 1 0 f"), "nothing of the first claim's landed");

    // The second claim's writes land.
    a.save_checkpoint(second, Checkpointed::Whole(&whole("f1", &["t1"])), &[event(2)], 2)
        .unwrap_or_else(|e| panic!("{e}"));
    let approval = json!({"tool": "create_file"});
    a.add_approval(tenant, second, "f1/c1", &approval).unwrap_or_else(|e| panic!("{e}"));
    a.add_approval(tenant, second, "f1/c1", &approval)
        .unwrap_or_else(|e| panic!("listed again (its data replaced): {e}"));
    a.set_run_status("f1", claim, "waiting-approval").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(row_now().as_deref(), Some("waiting-approval 2 2 1 t"));

    // Asking whether the run is still its own, taking its queued commands
    // and forgetting its approval: by the second claim only.
    assert!(a.add_command(tenant, "f1", "{}").unwrap_or_else(|e| panic!("{e}")));
    let mine = |c: Claim| a.still_mine(&[("f1".to_string(), c)]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((mine(Claim::FIRST), mine(claim)), (vec![], vec!["f1".to_string()]));
    let take = |c: Claim| a.take_commands(&[("f1".to_string(), c)]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(take(Claim::FIRST), vec![], "the first claim's task takes no command");
    assert_eq!(take(claim), vec![("f1".to_string(), "{}".to_string())]);
    a.remove_approvals(first, Some("f1/c1")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(row_now().as_deref(), Some("waiting-approval 2 2 1 t"), "the first claim forgets no approval");
    a.remove_approvals(second, Some("f1/c1")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(row_now().as_deref(), Some("waiting-approval 2 2 0 t"));
    a.finish_run("f1", claim, "completed", None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(query_text(&url, "SELECT status FROM runs WHERE id = 'f1'".into()).as_deref(), Some("completed"));
}
