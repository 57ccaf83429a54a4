//! `hookbox serve` as a real process: a server killed with SIGKILL while a
//! run waits keeps the run's events (stored every second) and, restarted,
//! marks the run `interrupted` and ends its event stream with `end`; keys
//! are listed by id and revoked at once; a new `HOOKBOX_OPERATOR_KEY`
//! rotates the old operator key out; `pin_workers = true` pins each
//! worker thread, and only those, to a core of its own.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use hookbox_tests::server::{ApiClient, test_config};
use hookbox_tests::{DENY_TOOLS, SCRIPTED};
use serde_json::json;

/// `hookbox serve` on a free port with the test config in `dir`.
struct Proc {
    child: Child,
    api: ApiClient,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn serve(dir: &Path, operator: &str) -> Proc {
    serve_with(dir, operator, "").await
}

/// [`serve`] with `settings`, top-level lines of `server.toml`.
async fn serve_with(dir: &Path, operator: &str, settings: &str) -> Proc {
    let config = test_config(&dir.join("data"), "");
    let toml = format!(
        "{settings}data_dir = \"{}\"\nworkspace_template = \"{}\"\n[models]\ndemo = \"{}\"\n",
        dir.join("data").display(),
        config.workspace_template.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
        config.models["demo"],
    );
    std::fs::write(dir.join("server.toml"), toml).unwrap_or_else(|e| panic!("{e}"));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("{e}"));
    let child = Command::new(env!("CARGO_BIN_EXE_hookbox-under-test"))
        .args(["serve", "--config"])
        .arg(dir.join("server.toml"))
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env("HOOKBOX_OPERATOR_KEY", operator)
        .stdout(std::fs::File::create(dir.join("stdout")).unwrap_or_else(|e| panic!("{e}")))
        .stderr(std::fs::File::create(dir.join("stderr")).unwrap_or_else(|e| panic!("{e}")))
        .spawn()
        .unwrap_or_else(|e| panic!("start hookbox serve: {e}"));
    let api = ApiClient::new(format!("http://127.0.0.1:{port}"), operator.to_string());
    let started = Instant::now();
    while api.http.get(format!("{}/healthz", api.base)).send().await.is_err() {
        assert!(started.elapsed() < Duration::from_secs(30), "the server did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Proc { child, api }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_keeps_the_events_of_a_waiting_run_and_ends_its_stream_after_a_restart() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let operator = format!("hbo_{}", "1f".repeat(32));
    let mut p = serve(dir.path(), &operator).await;
    let a = p.api.tenant("acme").await;
    p.api.install(&a, "deny-tools", DENY_TOOLS, json!({"config": {"paths": [".env"]}})).await;
    let asker =
        json!({"config": {"before-tool-call": "ask-approval:{tool} needs a person", "only_tool": "create_file"}});
    p.api.install(&a, "asker", SCRIPTED, asker).await;
    let run = p.api.start_run(&a, json!({})).await;
    p.api.wait_approval(&a, &run).await;
    // Longer than the one-second flush.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let _ = p.child.kill();
    let _ = p.child.wait();
    let p = serve(dir.path(), &operator).await;
    let got = p.api.get(&format!("/v1/runs/{run}"), &a).await;
    assert_eq!(got.json["status"], "interrupted", "{:?}", got.json);
    let events = p.api.events(&a, &run, None).await;
    assert!(events.iter().any(|e| e.1 == "approval"), "the events before the kill were lost: {events:?}");
    assert!(events.iter().filter(|e| e.1 == "hook-event").count() >= 5, "{events:?}");
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!((last.1.as_str(), last.2["status"].clone()), ("end", json!("interrupted")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_listed_by_id_and_revoked_at_once_and_a_new_operator_key_rotates_the_old_out() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let first = format!("hbo_{}", "2e".repeat(32));
    let mut p = serve(dir.path(), &first).await;
    let a = p.api.tenant("acme").await;
    let member = p.api.post("/v1/keys", &a, json!({"role": "member"})).await;
    let member = member.json["key"].as_str().unwrap_or_default().to_string();
    let keys = p.api.get("/v1/keys", &a).await;
    assert_eq!(keys.status, 200);
    let list = keys.json.as_array().cloned().unwrap_or_default();
    assert_eq!(list.len(), 2, "{list:?}");
    assert!(!keys.json.to_string().contains(&member[4..]) && !keys.json.to_string().contains(&a[4..]));
    assert_eq!(p.api.get("/v1/keys", &member).await.status, 403);
    let id = list.iter().find(|k| k["role"] == "member").and_then(|k| k["id"].as_str()).unwrap_or_default().to_string();
    assert_eq!(p.api.get("/v1/usage", &member).await.status, 200);
    assert_eq!(p.api.call("DELETE", &format!("/v1/keys/{id}"), Some(&a), None).await.status, 200);
    assert_eq!(p.api.get("/v1/usage", &member).await.status, 401, "a revoked key still works");
    assert_eq!(p.api.call("DELETE", &format!("/v1/keys/{id}"), Some(&a), None).await.status, 404);
    assert_eq!(p.api.call("DELETE", "/v1/keys/zz", Some(&a), None).await.status, 404);
    // Another tenant cannot revoke acme's admin key.
    let b = p.api.tenant("globex").await;
    let admin_id =
        list.iter().find(|k| k["role"] == "admin").and_then(|k| k["id"].as_str()).unwrap_or_default().to_string();
    assert_eq!(p.api.call("DELETE", &format!("/v1/keys/{admin_id}"), Some(&b), None).await.status, 404);
    assert_eq!(p.api.get("/v1/usage", &a).await.status, 200);
    // A restart with a new operator key: the old one no longer works.
    let _ = p.child.kill();
    let _ = p.child.wait();
    let second = format!("hbo_{}", "3d".repeat(32));
    let p = serve(dir.path(), &second).await;
    assert_eq!(p.api.get("/v1/admin/tenants", &second).await.status, 200);
    assert_eq!(p.api.get("/v1/admin/tenants", &first).await.status, 401, "the old operator key still works");
    assert_eq!(p.api.get("/v1/usage", &a).await.status, 200, "tenant keys outlive the rotation");
}

/// The cores in a `Cpus_allowed_list` value ("0-1", "3", "0,2-3").
fn cores(list: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) =
            (a.parse().unwrap_or_else(|e| panic!("{e}")), b.parse().unwrap_or_else(|e| panic!("{e}")));
        out.extend(a..=b);
    }
    out
}

/// Each thread of process `pid`: (name, the cores it may run on).
fn threads(pid: u32) -> Vec<(String, Vec<usize>)> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return out };
    for task in tasks.flatten() {
        let (Ok(comm), Ok(status)) =
            (std::fs::read_to_string(task.path().join("comm")), std::fs::read_to_string(task.path().join("status")))
        else {
            continue;
        };
        if let Some(list) = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")) {
            out.push((comm.trim().to_string(), cores(list)));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pin_workers_pins_each_worker_thread_and_no_other_to_a_core_of_its_own() {
    let own = threads(std::process::id()).into_iter().map(|(_, c)| c).max_by_key(Vec::len).unwrap_or_default();
    if own.len() < 2 {
        eprintln!("skipped: this process may use {} core(s)", own.len());
        return;
    }
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // Without the setting no thread is pinned.
    let operator = format!("hbo_{}", "3f".repeat(32));
    for sub in ["plain", "pinned"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap_or_else(|e| panic!("{e}"));
    }
    let plain = serve_with(&dir.path().join("plain"), &operator, "").await;
    assert!(plain.api.http.get(format!("{}/healthz", plain.api.base)).send().await.is_ok());
    let pinned_plain: Vec<_> = threads(plain.child.id()).into_iter().filter(|(_, c)| c.len() == 1).collect();
    assert_eq!(pinned_plain, Vec::new(), "no thread is pinned by default");
    drop(plain);

    let server = serve_with(&dir.path().join("pinned"), &operator, "pin_workers = true\n").await;
    // A worker pins itself the first time it parks, which it does once idle.
    let check = |when: &str| {
        let started = Instant::now();
        let pinned = loop {
            let all = threads(server.child.id());
            let pinned: Vec<_> = all.iter().filter(|(_, c)| c.len() == 1).cloned().collect();
            // Every other thread (blocking, epoch) keeps the whole mask. A
            // thread caught just after it was created, before the runtime
            // reset its mask, still shows its creator's: look again.
            let others_whole = all.iter().filter(|(_, c)| c.len() != 1).all(|(_, c)| c == &own);
            if (pinned.len() == 2 && others_whole) || started.elapsed() > Duration::from_secs(10) {
                for (name, c) in all.iter().filter(|(_, c)| c.len() != 1) {
                    assert_eq!(c, &own, "{when}: {name} lost cores");
                }
                break pinned;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(pinned.len(), 2, "{when}: the two worker threads, and nothing else, are pinned: {pinned:?}");
        assert!(pinned.iter().all(|(name, _)| name == "tokio-rt-worker"), "{when}: {pinned:?}");
        let mut on: Vec<usize> = pinned.iter().map(|(_, c)| c[0]).collect();
        on.sort();
        assert_eq!(on, own[..2].to_vec(), "{when}: each on a core of its own, in the mask's order");
    };
    check("at start");
    // It says so once it serves (the line may come just after /healthz).
    let line = format!("hookbox serve: worker threads pinned to cores {}, {}\n", own[0], own[1]);
    let started = Instant::now();
    let said = loop {
        let said = std::fs::read_to_string(dir.path().join("pinned/stdout")).unwrap_or_default();
        if said.contains(&line) || started.elapsed() > Duration::from_secs(10) {
            break said;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(said.contains(&line), "{said}");
    // After work that starts blocking threads from the workers (an upload
    // compiles and stores, a run, requests), still only the workers are
    // pinned: a blocking thread does not inherit its worker's core.
    let key = server.api.tenant("pinned").await;
    server.api.install(&key, "deny-tools", DENY_TOOLS, json!({"config": {"paths": [".env"]}})).await;
    let run = server.api.start_run(&key, json!({})).await;
    server.api.wait_run(&key, &run).await;
    for _ in 0..20 {
        assert_eq!(server.api.get("/v1/plugins", &key).await.status, 200);
    }
    check("after an upload, a run and 20 requests");
}
