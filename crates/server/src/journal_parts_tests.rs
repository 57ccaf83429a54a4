use super::*;
use crate::checkpoint::RunSpec;

fn tool(id: &str) -> ToolRecord {
    ToolRecord {
        tool_call_id: id.into(),
        name: "create_file".into(),
        ran: true,
        content: format!("wrote {id}"),
        success: true,
        reported_cost: None,
        cost_estimated: false,
        duration_ms: 3,
    }
}

fn run() -> ParkedRun {
    ParkedRun {
        spec: RunSpec {
            prompt: "p".into(),
            system: None,
            model: "replay".into(),
            plugins: vec![("guard".into(), 1)],
            session_key: "acme:s".into(),
        },
        checkpoint: Checkpoint {
            run_id: "r1".into(),
            turn: 1,
            responses: Vec::new(),
            tools: vec![tool("t1")],
            imports: BTreeMap::from([("guard".into(), vec![ImportValue::Random { value: 1 }])]),
            calls: Vec::new(),
            approvals: Vec::new(),
            deliveries: Vec::new(),
            begun: BTreeMap::from([("guard".into(), 1)]),
            started: vec!["t1".into()],
            pending: BTreeMap::new(),
            revisions: BTreeMap::new(),
            pauses: 0,
            events: 0,
        },
        approval: None,
        workspace: vec![("a.txt".into(), "41".into())],
        abort: None,
        paused: false,
        api_pause: false,
        counted_usd: 0.0,
        queued: false,
        inbox: vec!["hi".into()],
    }
}

/// The part that takes `from` to `to` (as `RunJournal::checkpoint_after` would give its tail).
fn part_between(from: &ParkedRun, to: &ParkedRun, workspace_changed: bool) -> JournalPart {
    let at = from.checkpoint.lengths();
    let skip = |n: u64| usize::try_from(n).expect("n");
    let mut tail = to.checkpoint.clone();
    tail.tools.drain(..skip(at.tools));
    tail.started.drain(..skip(at.started));
    tail.deliveries.drain(..skip(at.deliveries));
    for (plugin, values) in &mut tail.imports {
        values.drain(..skip(at.imports.get(plugin).copied().unwrap_or(0)));
    }
    let files = workspace_changed.then(|| to.workspace.clone());
    JournalPart::of(at, tail, (to.abort.clone(), to.inbox.clone(), files))
}

fn json(run: &ParkedRun) -> serde_json::Value {
    serde_json::to_value(run).expect("json")
}

/// The run one step on: a tool, an import of a new plugin, a delivery, new small fields.
fn grown(mut run: ParkedRun, n: u64) -> ParkedRun {
    let id = format!("t{}", n + 1);
    run.checkpoint.tools.push(tool(&id));
    run.checkpoint.started.push(id);
    run.checkpoint.imports.entry("guard".into()).or_default().push(ImportValue::Random { value: n });
    run.checkpoint.imports.entry(format!("p{n}")).or_default().push(ImportValue::Random { value: n * 10 });
    run.checkpoint.deliveries.push((n, vec![format!("m{n}")]));
    run.checkpoint.begun.insert("guard".into(), n + 1);
    run.checkpoint.pending = BTreeMap::from([("guard".into(), vec![(n + 1, Some(n))])]);
    run.checkpoint.revisions = BTreeMap::from([("guard".into(), n + 7)]);
    run.checkpoint.pauses = n;
    run.inbox.clear();
    run.workspace.push((format!("f{n}.txt"), "42".into()));
    run
}

#[test]
fn parts_applied_to_their_base_give_the_whole_checkpoint() {
    let base = run();
    let base_text = serde_json::to_string(&base).expect("text");
    let (mut now, mut parts) = (base.clone(), Vec::new());
    for n in 1..=3 {
        let next = grown(now.clone(), n);
        // The workspace changes in the first two steps only.
        parts.push(serde_json::to_string(&part_between(&now, &next, n < 3)).expect("part"));
        now = next;
    }
    // The third part did not carry the workspace: the second's stays.
    now.workspace.pop();
    let whole = compose(&base_text, &parts).expect("composed");
    assert_eq!(serde_json::from_str::<serde_json::Value>(&whole).expect("json"), json(&now));
    // Without parts, the base as it is.
    assert_eq!(compose(&base_text, &[]).expect("base"), base_text);
}

#[test]
fn a_part_that_does_not_follow_its_base_is_refused() {
    let base = run();
    let base_text = serde_json::to_string(&base).expect("text");
    let one = grown(base.clone(), 1);
    let part = serde_json::to_string(&part_between(&base, &one, false)).expect("text");
    // Stored twice (a write taken for lost and made again as a part): refused, not applied twice.
    let e = compose(&base_text, &[part.clone(), part.clone()]).expect_err("twice");
    assert!(e.contains("journal part 2"), "{e}");
    // Another run's part.
    let mut other = base.clone();
    other.checkpoint.run_id = "r2".into();
    let e =
        compose(&serde_json::to_string(&other).expect("text"), std::slice::from_ref(&part)).expect_err("another run");
    assert!(e.contains("another run"), "{e}");
    // Unknown fields and over-long part lists are refused.
    let e = compose(&base_text, &[part.replacen('{', r#"{"extra":1,"#, 1)]).expect_err("unknown field");
    assert!(e.contains("cannot be read"), "{e}");
    let many = vec![part; usize::try_from(MAX_PARTS).expect("n") + 1];
    assert!(compose(&base_text, &many).expect_err("many").contains("over"));
}

#[test]
fn an_abort_in_the_base_stays_when_a_later_part_has_none() {
    let mut base = run();
    base.abort = Some("operator".into());
    let base_text = serde_json::to_string(&base).expect("text");
    let mut one = grown(run(), 1);
    one.abort = None;
    let part = serde_json::to_string(&part_between(&base, &one, false)).expect("text");
    let whole = read(&compose(&base_text, &[part]).expect("composed")).expect("read");
    assert_eq!(whole.abort.as_deref(), Some("operator"));
    assert_eq!(whole.checkpoint.tools.len(), 2);
}

#[test]
fn a_workspace_hash_tells_files_apart() {
    let a = vec![("a".to_string(), "41".to_string())];
    let b = vec![("a4".to_string(), "1".to_string())];
    assert_ne!(workspace_hash(&a), workspace_hash(&b));
    assert_eq!(workspace_hash(&a), workspace_hash(&a.clone()));
}
