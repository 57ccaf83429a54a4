use hookbox_contract::Directive;

use super::*;
use hookbox_sandbox::HostEnv;

fn call(plugin: &str, directive: Directive) -> CallRecord {
    CallRecord {
        plugin: plugin.into(),
        event: "before-tool-call".into(),
        iteration: Some(1),
        directive: Some(directive),
        failure: None,
    }
}

#[test]
fn hex_round_trips_and_rejects_bad_input() {
    assert_eq!(to_hex(&[0, 1, 0xab, 0xff]), "0001abff");
    assert_eq!(from_hex("0001abff"), Some(vec![0, 1, 0xab, 0xff]));
    assert_eq!(from_hex("abc"), None);
    assert_eq!(from_hex("zz"), None);
    assert_eq!(from_hex("é1"), None);
}

#[test]
fn a_recording_journal_hands_out_live_values_and_a_replay_hands_them_back() {
    let rec = PluginJournal::new("p", false, Vec::new());
    let t = rec.now();
    let r = rec.random();
    let u = rec.uuid();
    rec.sleep(5);
    let mut bytes = [0u8; 16];
    rec.random_bytes(false, &mut bytes);
    let seed = rec.insecure_seed();
    assert_eq!(rec.entries().len(), 6);
    let replay = PluginJournal::new("p", true, rec.entries());
    assert_eq!(replay.now(), t);
    assert_eq!(replay.random(), r);
    assert_eq!(replay.uuid(), u);
    replay.sleep(5);
    let mut again = [0u8; 16];
    replay.random_bytes(false, &mut again);
    assert_eq!(again, bytes);
    assert_eq!(replay.insecure_seed(), seed);
    assert_eq!(replay.divergence(), None);
    assert_eq!(replay.unused(), 0);
}

#[test]
fn a_replay_asking_for_something_else_gets_a_live_value_and_a_divergence() {
    let rec = PluginJournal::new("p", false, Vec::new());
    rec.now();
    let replay = PluginJournal::new("p", true, rec.entries());
    let _ = replay.random();
    let d = replay.divergence().expect("divergence noted");
    assert!(d.contains("asked for `random` at import 1 where the journal has `now`"), "{d}");
    let replay = PluginJournal::new("p", true, Vec::new());
    let _ = replay.uuid();
    assert!(replay.divergence().expect("noted").contains("past the journal's 0 import value(s)"));
}

#[test]
fn state_is_replayed_whatever_the_store_holds_now() {
    let rec = PluginJournal::new("p", false, Vec::new());
    let got = rec.state(|| Some(("1".into(), b"{\"n\":2}".to_vec())));
    assert_eq!(got, Some(("1".into(), b"{\"n\":2}".to_vec())));
    let replay = PluginJournal::new("p", true, rec.entries());
    let got = replay.state(|| panic!("a replay must not read the store"));
    assert_eq!(got, Some(("1".into(), b"{\"n\":2}".to_vec())));
}

#[test]
fn the_import_log_is_capped() {
    let rec = PluginJournal::new("p", false, Vec::new());
    for _ in 0..MAX_PLUGIN_ENTRIES + 3 {
        rec.random();
    }
    assert_eq!(rec.entries().len(), MAX_PLUGIN_ENTRIES);
    assert_eq!(rec.dropped(), 3);
}

#[test]
fn compare_finds_the_first_difference() {
    let a = vec![call("x", Directive::Continue), call("y", Directive::SkipTool(Some("no".into())))];
    assert!(compare(&a, &a).same());
    let b = vec![call("x", Directive::Continue), call("y", Directive::Continue)];
    let d = compare(&a, &b).first_difference.expect("differs");
    assert_eq!((d.call, d.plugin_call), (2, 1));
    assert_eq!(
        d.describe(),
        "hook call 2: plugin `y` at `before-tool-call` (iteration 1): recorded skip-tool(\"no\"), replayed continue"
    );
    // A plugin missing from the replay is named, not compared call by call.
    let c = compare(&a, &a[..1]);
    assert_eq!(c.first_difference, None);
    assert_eq!(c.missing_plugins, vec!["y".to_string()]);
    assert!(!c.same());
    // An added plugin before the others does not shift their calls.
    let added = vec![call("z", Directive::Continue), a[0].clone(), a[1].clone()];
    let c = compare(&a, &added);
    assert_eq!((c.first_difference, c.added_plugins.clone()), (None, vec!["z".to_string()]));
    // A plugin that makes fewer calls: the first one it did not make.
    let twice = vec![call("x", Directive::Continue), call("x", Directive::Continue)];
    let d = compare(&twice, &twice[..1]).first_difference.expect("fewer");
    assert_eq!((d.call, d.plugin_call), (2, 2));
    assert!(d.describe().contains("the replay made no such call"), "{}", d.describe());
}

/// Issue 13, E.16: a hook's 5 MB `replace-result` is not stored whole in the
/// journal: a prefix and the BLAKE3 of the whole, so two long values that
/// share their start still differ, and a short value is kept as it is.
#[test]
fn long_directive_strings_are_journaled_as_a_prefix_and_a_digest() {
    let journal = RunJournal::recording();
    let long_a = format!("{}a", "x".repeat(5_000_000));
    let long_b = format!("{}b", "x".repeat(5_000_000));
    journal.record_call(call("p", Directive::ReplaceResult(long_a.clone())));
    journal.record_call(call("p", Directive::ReplaceResult(long_b)));
    journal.record_call(call("p", Directive::SkipTool(Some("short".into()))));
    let calls = journal.calls();
    let text = |i: usize| match &calls[i].directive {
        Some(Directive::ReplaceResult(t)) => t.clone(),
        other => panic!("{other:?}"),
    };
    let (a, b) = (text(0), text(1));
    assert!(a.chars().count() < 1_200, "{} chars", a.chars().count());
    assert!(a.starts_with(&"x".repeat(DIGEST_PREFIX_CHARS)) && a.contains("[5000001 chars, blake3 "), "{}", &a[1000..]);
    assert_ne!(a, b, "the digest tells them apart");
    assert_eq!(a, digest_long(&long_a), "deterministic: a replay digests the same way");
    assert_eq!(calls[2].directive, Some(Directive::SkipTool(Some("short".into()))));
}

/// A hostile journal can hold thousands of tool calls: a replay lists the
/// first `MAX_TOOL_DIVERGENCES` that went otherwise and counts the rest.
#[test]
fn tool_divergences_are_listed_up_to_a_bound_and_counted() {
    let Ok(mut j) = Arc::try_unwrap(RunJournal::recording()) else { panic!("one owner") };
    j.note_tool_divergence("not kept while recording".into());
    assert!(j.divergences().is_empty());
    j.replaying = true;
    for i in 0..MAX_TOOL_DIVERGENCES + 50 {
        j.note_tool_divergence(format!("call {i}"));
    }
    let d = j.divergences();
    assert_eq!(d.len(), MAX_TOOL_DIVERGENCES + 1);
    assert_eq!(d[0], "call 0");
    assert_eq!(d[MAX_TOOL_DIVERGENCES], "50 more tool call(s) went otherwise (not listed)");
}

#[test]
fn a_resuming_journal_hands_back_the_checkpoint_then_writes_live_values_after_it() {
    let rec = PluginJournal::new("p", false, Vec::new());
    let t = rec.now();
    let r = rec.random();
    let resumed = PluginJournal::resuming("p", rec.entries(), 1);
    assert!(resumed.replaying_calls() && resumed.catching_up());
    resumed.begin_call();
    assert!(HostEnv::replays_call(&resumed), "the first call re-executes");
    assert_eq!(resumed.now(), t);
    assert_eq!(resumed.random(), r);
    assert!(!resumed.catching_up(), "every value and call handed back");
    resumed.begin_call();
    assert!(!HostEnv::replays_call(&resumed), "the second call is live");
    assert_eq!(resumed.begun(), 2);
    let u = resumed.uuid();
    assert_eq!(resumed.entries().len(), 3, "the live value is written after the checkpoint's");
    assert_eq!(resumed.entries()[2], ImportValue::Uuid { value: u });
    assert_eq!(resumed.divergence(), None);

    // Asking for something else drops the rest of the checkpoint's values and goes live.
    let other = PluginJournal::resuming("p", rec.entries(), 0);
    let _ = other.uuid();
    assert_eq!(other.entries().len(), 1);
    assert!(other.divergence().expect("noted").contains("another value than the checkpoint's `now`"));
    // Its values were cut back: a store must not append to what it wrote of them.
    assert_eq!((resumed.rewrites(), other.rewrites()), (0, 1));
}

#[test]
fn a_checkpoint_after_given_lengths_holds_what_came_after_them() {
    let rec = RunJournal::recording();
    rec.plugin("p").now();
    rec.record_call(call("p", Directive::Continue));
    rec.delivery(vec!["one".into()]);
    let first = rec.checkpoint(Vec::new());
    rec.plugin("p").random();
    rec.plugin("q").uuid();
    rec.record_call(call("q", Directive::Continue));
    rec.delivery(vec!["two".into()]);
    let whole = rec.checkpoint(Vec::new());
    let tail = rec.checkpoint_after(Vec::new(), &first.lengths()).expect("it only grew");
    assert_eq!((tail.imports["p"].len(), tail.imports["q"].len()), (1, 1));
    assert_eq!(tail.imports["p"][0], whole.imports["p"][1]);
    assert_eq!(tail.calls, whole.calls[1..]);
    assert_eq!(tail.deliveries, whole.deliveries[1..]);
    assert_eq!((tail.begun.clone(), tail.pauses), (whole.begun.clone(), whole.pauses));
    let mut lengths = first.lengths();
    lengths.extend(&tail);
    assert_eq!(lengths, whole.lengths());
    // Lengths the journal does not reach (or a plugin it lacks): no tail.
    let mut longer = whole.lengths();
    longer.calls += 1;
    assert!(rec.checkpoint_after(Vec::new(), &longer).is_none());
    let mut other = whole.lengths();
    other.imports.insert("r".into(), 1);
    assert!(rec.checkpoint_after(Vec::new(), &other).is_none());
}

#[test]
fn a_resumed_run_delivers_at_each_boundary_what_the_checkpoint_delivered_then_goes_live() {
    let rec = RunJournal::recording();
    assert_eq!(rec.delivery(Vec::new()), Vec::<String>::new());
    assert_eq!(rec.delivery(vec!["from the API".into()]), vec!["from the API".to_string()]);
    let mut checkpoint = rec.checkpoint(Vec::new());
    assert_eq!(checkpoint.deliveries, vec![(1, vec!["from the API".to_string()])]);
    // An approval answer still to hand back keeps the resumed run catching up past boundary 1.
    checkpoint.answer(ApprovalRecord {
        id: "r/c".into(),
        tool: "create_file".into(),
        tool_call_id: "c".into(),
        reasons: Vec::new(),
        answer: hookbox_contract::ApprovalAnswer::Approve,
        answered_by: hookbox_contract::AnsweredBy::Host,
    });
    let resumed = RunJournal::resuming(&checkpoint);
    // Boundary 0: nothing then; a hook's re-executed injection is not delivered twice.
    assert_eq!(resumed.delivery(Vec::new()), Vec::<String>::new());
    // Boundary 1: the API's message again, though nobody injects it now.
    assert_eq!(resumed.delivery(Vec::new()), vec!["from the API".to_string()]);
    assert!(resumed.catching_up(), "the answer is still to hand back");
    assert_eq!(resumed.delivery(vec!["during the re-execution".into()]), Vec::<String>::new());
    assert!(resumed.resumed_approval("r/c").is_some());
    assert!(!resumed.catching_up());
    // Past the checkpoint: live, and written after the checkpoint's.
    assert_eq!(resumed.delivery(vec!["live".into()]), vec!["live".to_string()]);
    assert_eq!(resumed.checkpoint(Vec::new()).deliveries.len(), 2);
}

#[test]
fn a_park_counts_its_events_and_the_resumed_run_owes_the_stream_only_those() {
    let live = RunJournal::recording();
    for _ in 0..3 {
        assert!(!live.stream_owed(), "a live run owes its stream nothing");
        live.event_dispatched();
    }
    let mut checkpoint = live.checkpoint(Vec::new());
    assert_eq!(checkpoint.events, 0, "a safe point's checkpoint marks no events");
    checkpoint.events = live.events_dispatched();
    assert_eq!(checkpoint.events, 3);
    let resumed = RunJournal::resuming(&checkpoint);
    // The first three events re-executed are in the stored stream already, the third included.
    for n in 1..=3 {
        assert!(resumed.stream_owed(), "event {n} is the stream's already");
        resumed.event_dispatched();
    }
    assert!(!resumed.stream_owed(), "the fourth event is new");
    assert_eq!(resumed.events_dispatched(), 3);
}

/// Rule: a checkpoint keeps the state revision each plugin's instance knew
/// when its last call ended, and counts the calls begun and not ended (a
/// detached call still running). A resumed journal gives a re-executed
/// call's instance the checkpoint's revision (or the later one it learnt
/// making a pending commit again), and a live call's its own.
#[test]
fn a_checkpoint_keeps_each_instances_state_revision_and_the_calls_in_flight() {
    let rec = RunJournal::recording();
    let p = rec.plugin("p");
    p.begin_call();
    assert_eq!(rec.calls_in_flight(), 1, "begun, not ended");
    assert_eq!(p.call_ended(Some(4)), Some(4), "a live call keeps what it knows");
    assert_eq!(rec.calls_in_flight(), 0);
    let checkpoint = rec.checkpoint(Vec::new());
    assert_eq!(checkpoint.revisions, BTreeMap::from([("p".to_string(), 4)]));

    let resumed = RunJournal::resuming(&checkpoint);
    let p = resumed.plugin("p");
    p.begin_call();
    assert!(p.replays_call());
    assert_eq!(p.call_ended(None), Some(4), "re-executed: the checkpoint's revision");
    p.begin_call();
    assert_eq!(p.call_ended(None), None, "live: an instance that knows none (it was dropped)");
    assert_eq!(resumed.checkpoint(Vec::new()).revisions, BTreeMap::new());

    let again = RunJournal::resuming(&checkpoint);
    let p = again.plugin("p");
    p.begin_call();
    assert_eq!(p.call_ended(Some(5)), Some(5), "re-executed, its pending commit made again: the later one");
}
