//! An abort through the run handle (what the CLI's first Ctrl-C does) ends a
//! run whose model request is still in flight at once: the request is
//! dropped, not waited for.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::sync::Arc;
use std::time::{Duration, Instant};

use hookbox::providers::http::{Api, HttpOptions, HttpProvider};
use hookbox::sandbox::HookChain;
use hookbox::{Agent, AgentConfig, RunErrorInfo, RunHandle};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

async fn aborted_while(stream: bool) -> (RunErrorInfo, Duration, usize) {
    let server = MockServer::start().await;
    // A provider that takes a minute to answer.
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_string("{}").set_delay(Duration::from_secs(60)))
        .mount(&server)
        .await;
    let options = HttpOptions {
        base_url: Some(format!("{}/v1", server.uri())),
        api_key: Some("k".into()),
        stream,
        ..HttpOptions::default()
    };
    let provider = Arc::new(HttpProvider::with_env(Api::OpenAi, "gpt-4o", options, &|_| None).expect("provider"));
    let agent = Agent::new(provider, Vec::new(), AgentConfig::default());
    let handle = RunHandle::new();
    let aborter = handle.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        aborter.abort("interrupted (SIGINT)");
    });
    let started = Instant::now();
    let err = agent.run_with_handle("hi", &mut HookChain::new(Vec::new()), handle).await.expect_err("aborted");
    let requests = server.received_requests().await.expect("recorded").len();
    (err.info, started.elapsed(), requests)
}

#[tokio::test]
async fn an_abort_does_not_wait_for_a_model_request_in_flight() {
    for stream in [false, true] {
        let (info, took, requests) = aborted_while(stream).await;
        assert_eq!(
            info,
            RunErrorInfo::Aborted {
                reason: Some("interrupted (SIGINT)".into()),
                plugin: None,
                event: Some("model request".into())
            },
            "stream {stream}"
        );
        assert!(took < Duration::from_secs(10), "ended near the abort, not after the minute: {took:?}");
        assert_eq!(requests, 1, "the request was made once and not retried");
    }
}
