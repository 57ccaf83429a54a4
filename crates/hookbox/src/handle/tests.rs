//! Unit tests of the run handle: pauses, aborts, approvals, injections.

use super::*;

#[test]
fn inject_rules() {
    let h = RunHandle::new();
    assert_eq!(h.inject("  "), Err(HandleError::Empty));
    assert_eq!(h.inject("a"), Ok(()));
    h.push_injection("b".into());
    assert_eq!(h.drain(), vec!["a".to_string(), "b".to_string()]);
    assert_eq!(h.inject("c"), Ok(()));
    assert_eq!(h.close(), vec!["c".to_string()]);
    assert_eq!(h.inject("d"), Err(HandleError::Finished));
    assert!(h.finished());
}

#[test]
fn an_answer_for_a_pause_that_ended_does_not_touch_the_next() {
    let h = RunHandle::new();
    assert_eq!(h.pause_id(), None);
    h.pause();
    h.pause(); // the same pause
    assert_eq!(h.pause_id(), Some(1));
    h.resume(); // e.g. the pause timeout
    h.pause();
    assert_eq!(h.pause_id(), Some(2));
    assert!(!h.abort_pause(1, "late no"), "pause 1 is over");
    assert!(!h.resume_pause(1));
    assert_eq!(h.abort_requested(), None);
    assert!(h.paused());
    assert!(h.resume_pause(2));
    assert!(!h.paused());
    h.pause();
    assert!(h.abort_pause(3, "no"));
    assert_eq!(h.abort_requested(), Some(Some("no".into())));
}

#[tokio::test]
async fn a_paused_run_waits_until_resumed_from_another_thread() {
    let h = RunHandle::new();
    h.pause();
    let other = h.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        other.resume();
    });
    let started = std::time::Instant::now();
    assert_eq!(h.safe_point(None, PauseTimeout::Abort).await, SafePoint::Proceed);
    assert!(started.elapsed() >= std::time::Duration::from_millis(40));
    t.join().expect("thread");
}

#[tokio::test]
async fn a_pause_is_waited_in_only_at_a_safe_point() {
    let h = RunHandle::new();
    h.pause();
    assert_eq!(h.waiting_in_pause(), None, "paused, but not yet at a safe point (a tool may run)");
    let other = h.clone();
    let waiter = tokio::spawn(async move { other.safe_point(None, PauseTimeout::Abort).await });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while h.waiting_in_pause().is_none() {
        assert!(std::time::Instant::now() < deadline, "the safe point waits");
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    assert_eq!(h.waiting_in_pause(), Some(1));
    h.resume();
    assert_eq!(waiter.await.expect("waiter"), SafePoint::Proceed);
    assert_eq!(h.waiting_in_pause(), None, "past the safe point");
    // A safe point dropped while it waits (a parked run) no longer counts as waiting.
    h.pause();
    let other = h.clone();
    let waiter = tokio::spawn(async move { other.safe_point(None, PauseTimeout::Abort).await });
    while h.waiting_in_pause().is_none() {
        assert!(std::time::Instant::now() < deadline, "the safe point waits");
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    waiter.abort();
    assert!(waiter.await.expect_err("dropped").is_cancelled());
    assert_eq!(h.waiting_in_pause(), None);
}

#[tokio::test]
async fn a_pause_no_other_handle_can_resume_aborts_unless_a_timeout_is_set() {
    let h = RunHandle::new();
    h.pause();
    assert_eq!(h.safe_point(None, PauseTimeout::Abort).await, SafePoint::Abort(Some(UNRESUMABLE_PAUSE.into())));
    // With a timeout, the timeout decides.
    let t = Some(std::time::Duration::from_millis(10));
    assert_eq!(h.safe_point(t, PauseTimeout::Resume).await, SafePoint::Proceed);
    // A clone dropped while the run waits: the run wakes and aborts.
    h.pause();
    let other = h.clone();
    let dropper = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        drop(other);
    });
    let waited = tokio::time::timeout(std::time::Duration::from_secs(5), h.safe_point(None, PauseTimeout::Abort));
    assert_eq!(waited.await, Ok(SafePoint::Abort(Some(UNRESUMABLE_PAUSE.into()))));
    dropper.await.expect("task");
}

#[tokio::test]
async fn abort_releases_a_pause_and_the_timeout_decides() {
    let h = RunHandle::new();
    h.pause();
    let other = h.clone();
    tokio::spawn(async move { other.abort("stop") });
    assert_eq!(h.safe_point(None, PauseTimeout::Abort).await, SafePoint::Abort(Some("stop".into())));

    let h = RunHandle::new();
    h.pause();
    let t = Some(std::time::Duration::from_millis(20));
    assert!(
        matches!(h.safe_point(t, PauseTimeout::Abort).await, SafePoint::Abort(Some(r)) if r.contains("pause timeout"))
    );
    h.pause();
    assert_eq!(h.safe_point(t, PauseTimeout::Resume).await, SafePoint::Proceed);
    assert!(!h.paused());
}

#[test]
fn a_checkpoint_finds_each_injected_message_in_the_queue_or_the_journal_never_both() {
    let h = RunHandle::new();
    h.push_injection("a hook's".into());
    let (waiting, ()) = h.undelivered_with(|| ());
    assert!(waiting.is_empty(), "a hook's injection is made again by re-execution: {waiting:?}");
    h.drain();
    let journal = Arc::new(Mutex::new(Vec::<String>::new()));
    let injected = Arc::new(AtomicUsize::new(0));
    const N: usize = 2000;
    let run = {
        let (h, journal, injected) = (h.clone(), journal.clone(), injected.clone());
        std::thread::spawn(move || {
            for i in 0..N {
                h.inject(format!("m{i}")).expect("open");
                injected.fetch_add(1, Ordering::SeqCst);
                if i % 3 == 2 {
                    // A turn boundary, journaling what it delivers.
                    h.drain_with(|queued| {
                        // Journaling takes a while: a reader in between must not see a gap.
                        std::thread::sleep(std::time::Duration::from_micros(50));
                        journal.lock().expect("journal").extend(queued);
                    });
                }
            }
        })
    };
    let mut reads = 0;
    while !run.is_finished() || reads == 0 {
        let before = injected.load(Ordering::SeqCst);
        let (waiting, delivered) = h.undelivered_with(|| journal.lock().expect("journal").clone());
        let mut seen = std::collections::HashSet::new();
        for text in waiting.iter().chain(&delivered) {
            assert!(seen.insert(text.clone()), "{text} is both waiting and delivered");
        }
        for i in 0..before {
            assert!(seen.contains(&format!("m{i}")), "m{i} is neither waiting nor delivered");
        }
        reads += 1;
    }
    run.join().expect("run thread");
}
