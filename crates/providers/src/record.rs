//! `hookbox run --record FILE`: a provider wrapper that keeps every response
//! and writes them as a replay session ([`super::replay::RECORDED_FORMAT`]),
//! which [`super::replay::ReplayProvider`] plays back exactly: the same
//! responses, so the same events and the same hook calls.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::json;

use super::replay::{RECORDED_FORMAT, SESSION_VERSION};
use crate::model::{Delta, ModelProvider, ModelRequest, ModelResponse, ProviderError};

/// Wraps a provider and records its responses.
pub struct RecordingProvider {
    inner: Arc<dyn ModelProvider>,
    /// Every response: the ones given to [`RecordingProvider::resuming`], then the recorded ones.
    responses: Mutex<Vec<ModelResponse>>,
    /// Resuming: how many of `responses` were given, and how many of those were handed back.
    preloaded: usize,
    handed_back: Mutex<usize>,
}

impl RecordingProvider {
    /// Records what `inner` answers.
    pub fn new(inner: Arc<dyn ModelProvider>) -> Self {
        RecordingProvider::resuming(inner, Vec::new())
    }

    /// A run resumed from a checkpoint: answers with `responses` first, in
    /// order and whatever the request (the model is not called for them),
    /// then records what `inner` answers after them.
    pub fn resuming(inner: Arc<dyn ModelProvider>, responses: Vec<ModelResponse>) -> Self {
        let preloaded = responses.len();
        inner.skip_answered(preloaded);
        RecordingProvider { inner, responses: Mutex::new(responses), preloaded, handed_back: Mutex::new(0) }
    }

    /// Every response: the ones given to [`RecordingProvider::resuming`] and the recorded ones.
    pub fn responses(&self) -> Vec<ModelResponse> {
        self.responses.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The responses after the first `n` (the tail of
    /// [`RecordingProvider::responses`]); `None` when there are fewer than `n`.
    pub fn responses_after(&self, n: usize) -> Option<Vec<ModelResponse>> {
        self.responses.lock().ok()?.get(n..).map(<[ModelResponse]>::to_vec)
    }

    /// Resuming: true while given responses are left to hand back.
    pub fn catching_up(&self) -> bool {
        self.handed_back.lock().map(|n| *n < self.preloaded).unwrap_or(false)
    }

    /// The next given response, if one is left (resuming).
    fn hand_back(&self) -> Option<ModelResponse> {
        let mut n = self.handed_back.lock().ok()?;
        if *n >= self.preloaded {
            return None;
        }
        let response = self.responses.lock().ok()?.get(*n).cloned();
        *n += 1;
        response
    }

    /// How many responses were recorded.
    pub fn len(&self) -> usize {
        self.responses.lock().map(|r| r.len()).unwrap_or(0)
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The session file's JSON.
    pub fn session(&self) -> serde_json::Value {
        let responses = self.responses.lock().map(|r| r.clone()).unwrap_or_default();
        json!({
            "hookbox_replay": SESSION_VERSION,
            "format": RECORDED_FORMAT,
            "model": self.inner.model(),
            "note": format!("recorded by hookbox run --record from the `{}` provider", self.inner.name()),
            "responses": responses,
        })
    }

    /// The session file's text: pretty-printed JSON.
    ///
    /// Errors: it cannot be serialised (a non-finite number).
    pub fn to_text(&self) -> std::io::Result<String> {
        serde_json::to_string_pretty(&self.session()).map_err(std::io::Error::other)
    }

    fn keep(&self, response: &ModelResponse) {
        if let Ok(mut r) = self.responses.lock() {
            r.push(response.clone());
        }
    }
}

#[async_trait]
impl ModelProvider for RecordingProvider {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn skip_answered(&self, responses: usize) {
        self.inner.skip_answered(responses);
    }

    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        if let Some(response) = self.hand_back() {
            return Ok(response);
        }
        let response = self.inner.complete(request).await?;
        self.keep(&response);
        Ok(response)
    }

    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_delta: &(dyn Fn(Delta) + Send + Sync),
    ) -> Result<ModelResponse, ProviderError> {
        if let Some(response) = self.hand_back() {
            return Ok(response);
        }
        let response = self.inner.complete_streaming(request, on_delta).await?;
        self.keep(&response);
        Ok(response)
    }
}
