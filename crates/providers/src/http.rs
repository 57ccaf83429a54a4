//! The live providers: [`HttpProvider`] sends [`ModelRequest`]s to the
//! Anthropic, OpenAI (Chat Completions and Responses) and Gemini APIs with
//! reqwest, streaming by default.
//!
//! | spec | API | key variable, header | base URL variable, default | endpoint |
//! |---|---|---|---|---|
//! | `anthropic:MODEL` | Messages | `ANTHROPIC_API_KEY`, `x-api-key` (+ `anthropic-version: 2023-06-01`) | `ANTHROPIC_BASE_URL`, `https://api.anthropic.com` | `{base}/v1/messages` |
//! | `openai:MODEL` | Chat Completions | `OPENAI_API_KEY`, `Authorization: Bearer` | `OPENAI_BASE_URL`, `https://api.openai.com/v1` | `{base}/chat/completions` |
//! | `openai-responses:MODEL` | Responses | as `openai` | as `openai` | `{base}/responses` |
//! | `gemini:MODEL` | generateContent | `GEMINI_API_KEY`, `x-goog-api-key` | `GEMINI_BASE_URL`, `https://generativelanguage.googleapis.com` | `{base}/v1beta/models/{MODEL}:generateContent`, streamed `:streamGenerateContent?alt=sse` |
//!
//! API docs: Anthropic <https://docs.anthropic.com/en/api/messages> and
//! <https://docs.anthropic.com/en/api/versioning>; OpenAI
//! <https://platform.openai.com/docs/api-reference/chat/create> and
//! <https://platform.openai.com/docs/api-reference/responses/create>
//! (`OPENAI_BASE_URL` includes `/v1`, as in OpenAI's SDKs, so that
//! OpenAI-compatible servers such as vLLM, llama.cpp, Ollama or OpenRouter
//! are reached by setting it); Gemini
//! <https://ai.google.dev/api/generate-content> and the API-key header
//! <https://ai.google.dev/gemini-api/docs/api-key>.
//!
//! The base URL is the explicit option, else the environment variable, else
//! the public default. Streamed requests ask for usage (`stream_options.
//! include_usage` on Chat Completions). Providers never retry: every failure
//! is returned as a typed [`ProviderError`] and
//! [`super::retry::RetryPolicy`] decides (the agent loop owns the loop).

use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::WireFormat;
use super::retry::parse_retry_after;
use super::sse::SseDecoder;
use crate::model::{Delta, ModelProvider, ModelRequest, ModelResponse, ProviderError};

/// The Anthropic API version header value sent with every request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// How many bytes of an error response body [`ProviderError::Http`] keeps.
pub const ERROR_BODY_LIMIT: usize = 4096;

/// A live provider API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Api {
    /// Anthropic Messages (`anthropic:MODEL`).
    Anthropic,
    /// OpenAI Chat Completions and compatible servers (`openai:MODEL`).
    OpenAi,
    /// OpenAI Responses (`openai-responses:MODEL`).
    OpenAiResponses,
    /// Google Gemini generateContent (`gemini:MODEL`).
    Gemini,
}

impl Api {
    /// Every API, in a fixed order.
    pub const ALL: [Api; 4] = [Api::Anthropic, Api::OpenAi, Api::OpenAiResponses, Api::Gemini];

    /// The `--model` scheme and provider name: `anthropic`, `openai`,
    /// `openai-responses` or `gemini`.
    pub fn scheme(self) -> &'static str {
        match self {
            Api::Anthropic => "anthropic",
            Api::OpenAi => "openai",
            Api::OpenAiResponses => "openai-responses",
            Api::Gemini => "gemini",
        }
    }

    /// The API with this scheme (see [`Api::scheme`]).
    pub fn from_scheme(scheme: &str) -> Option<Api> {
        Api::ALL.into_iter().find(|a| a.scheme() == scheme)
    }

    /// The wire format the API speaks.
    pub fn wire_format(self) -> WireFormat {
        match self {
            Api::Anthropic => WireFormat::AnthropicMessages,
            Api::OpenAi => WireFormat::OpenAiChat,
            Api::OpenAiResponses => WireFormat::OpenAiResponses,
            Api::Gemini => WireFormat::Gemini,
        }
    }

    /// The environment variable holding the API key.
    pub fn key_env(self) -> &'static str {
        match self {
            Api::Anthropic => "ANTHROPIC_API_KEY",
            Api::OpenAi | Api::OpenAiResponses => "OPENAI_API_KEY",
            Api::Gemini => "GEMINI_API_KEY",
        }
    }

    /// The environment variable that overrides the base URL.
    pub fn base_url_env(self) -> &'static str {
        match self {
            Api::Anthropic => "ANTHROPIC_BASE_URL",
            Api::OpenAi | Api::OpenAiResponses => "OPENAI_BASE_URL",
            Api::Gemini => "GEMINI_BASE_URL",
        }
    }

    /// The public base URL.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Api::Anthropic => "https://api.anthropic.com",
            Api::OpenAi | Api::OpenAiResponses => "https://api.openai.com/v1",
            Api::Gemini => "https://generativelanguage.googleapis.com",
        }
    }
}

/// The default [`HttpOptions::read_timeout`]: 300 s.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(300);

/// Options of an [`HttpProvider`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// The base URL; `None` → the API's environment variable, else its
    /// public default ([`Api::base_url_env`], [`Api::default_base_url`]).
    pub base_url: Option<String>,
    /// The API key; `None` → the API's environment variable ([`Api::key_env`]).
    pub api_key: Option<String>,
    /// Stream responses (SSE). Default `true`.
    pub stream: bool,
    /// Limit on establishing a connection. Default 30 s.
    pub connect_timeout: Duration,
    /// Limit on waiting for the next bytes of a response (not on the whole
    /// response: a long stream that keeps sending is never cut). Default 300 s
    /// ([`DEFAULT_READ_TIMEOUT`]). A stream that goes quiet for this long is
    /// [`ProviderError::Stalled`], retried unless it had already handed out
    /// text ([`crate::retry::is_retryable`]).
    pub read_timeout: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            base_url: None,
            api_key: None,
            stream: true,
            connect_timeout: Duration::from_secs(30),
            read_timeout: DEFAULT_READ_TIMEOUT,
        }
    }
}

/// Why an [`HttpProvider`] could not be built.
#[derive(Debug, thiserror::Error)]
pub enum HttpConfigError {
    /// No API key: the variable is unset or empty and none was given.
    #[error(
        "{var} is not set: the {scheme} provider needs an API key (for a server without authentication, set it to any value)"
    )]
    MissingApiKey {
        /// The variable to set.
        var: &'static str,
        /// The provider (`anthropic`, ...).
        scheme: &'static str,
    },
    /// The base URL is not an `http://` or `https://` URL.
    #[error("base URL `{url}` for {scheme}: {reason}")]
    BadBaseUrl {
        /// The URL as given.
        url: String,
        /// The provider.
        scheme: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The API key cannot be sent as a header value (control characters).
    #[error("{var} holds characters that cannot be sent in an HTTP header")]
    BadApiKey {
        /// The variable (or option) it came from.
        var: &'static str,
    },
    /// reqwest could not build its client (TLS setup).
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// A live provider (see the module docs for the APIs and variables).
#[derive(Debug, Clone)]
pub struct HttpProvider {
    api: Api,
    model: String,
    base_url: String,
    headers: HeaderMap,
    stream: bool,
    read_timeout: Duration,
    client: reqwest::Client,
}

/// The base URL: explicit > environment > default, without trailing `/`.
fn resolve_base_url(
    api: Api,
    explicit: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, HttpConfigError> {
    let url = explicit
        .map(str::to_owned)
        .or_else(|| env(api.base_url_env()).filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| api.default_base_url().to_owned());
    let trimmed = url.trim().trim_end_matches('/').to_owned();
    let parsed = reqwest::Url::parse(&trimmed).map_err(|e| HttpConfigError::BadBaseUrl {
        url: url.clone(),
        scheme: api.scheme(),
        reason: e.to_string(),
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(HttpConfigError::BadBaseUrl {
            url,
            scheme: api.scheme(),
            reason: format!("the scheme is `{}`, expected http or https", parsed.scheme()),
        });
    }
    Ok(trimmed)
}

fn is_loopback(base_url: &str) -> bool {
    reqwest::Url::parse(base_url).ok().and_then(|u| u.host_str().map(str::to_owned)).is_some_and(|h| {
        h == "localhost" || h.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()) || h == "[::1]"
    })
}

impl HttpProvider {
    /// Builds a provider for `model` on `api`, reading the key and base URL
    /// from the environment where `options` does not give them.
    ///
    /// # Errors
    ///
    /// [`HttpConfigError::MissingApiKey`] naming the variable when there is no
    /// key; [`HttpConfigError::BadBaseUrl`] for a base URL that is not
    /// http(s); [`HttpConfigError::BadApiKey`]; [`HttpConfigError::Client`].
    pub fn new(api: Api, model: &str, options: HttpOptions) -> Result<Self, HttpConfigError> {
        Self::with_env(api, model, options, &|name| std::env::var(name).ok())
    }

    /// As [`HttpProvider::new`], reading variables through `env` (tests).
    ///
    /// # Errors
    ///
    /// As [`HttpProvider::new`].
    pub fn with_env(
        api: Api,
        model: &str,
        options: HttpOptions,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, HttpConfigError> {
        let key = options
            .api_key
            .clone()
            .or_else(|| env(api.key_env()))
            .filter(|k| !k.trim().is_empty())
            .ok_or(HttpConfigError::MissingApiKey { var: api.key_env(), scheme: api.scheme() })?;
        let base_url = resolve_base_url(api, options.base_url.as_deref(), env)?;
        let secret = |value: String| {
            let mut v = HeaderValue::from_str(&value).map_err(|_| HttpConfigError::BadApiKey { var: api.key_env() })?;
            v.set_sensitive(true);
            Ok::<_, HttpConfigError>(v)
        };
        let mut headers = HeaderMap::new();
        headers.insert(reqwest::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        match api {
            Api::Anthropic => {
                headers.insert(HeaderName::from_static("x-api-key"), secret(key.trim().to_owned())?);
                headers
                    .insert(HeaderName::from_static("anthropic-version"), HeaderValue::from_static(ANTHROPIC_VERSION));
            }
            Api::OpenAi | Api::OpenAiResponses => {
                headers.insert(reqwest::header::AUTHORIZATION, secret(format!("Bearer {}", key.trim()))?);
            }
            Api::Gemini => {
                headers.insert(HeaderName::from_static("x-goog-api-key"), secret(key.trim().to_owned())?);
            }
        }
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("hookbox/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(options.connect_timeout)
            .read_timeout(options.read_timeout);
        if is_loopback(&base_url) {
            // A local server (tests, Ollama, llama.cpp) is never reached through a proxy.
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(|e| HttpConfigError::Client(error_chain(&e)))?;
        Ok(HttpProvider {
            api,
            model: model.to_owned(),
            base_url,
            headers,
            stream: options.stream,
            read_timeout: options.read_timeout,
            client,
        })
    }

    /// The API.
    pub fn api(&self) -> Api {
        self.api
    }

    /// The base URL in use (without trailing `/`).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Whether responses are streamed.
    pub fn streams(&self) -> bool {
        self.stream
    }

    /// The URL requests are posted to.
    pub fn endpoint(&self) -> String {
        let base = &self.base_url;
        match self.api {
            Api::Anthropic => format!("{base}/v1/messages"),
            Api::OpenAi => format!("{base}/chat/completions"),
            Api::OpenAiResponses => format!("{base}/responses"),
            Api::Gemini => {
                let model = self.model.strip_prefix("models/").unwrap_or(&self.model);
                if self.stream {
                    format!("{base}/v1beta/models/{model}:streamGenerateContent?alt=sse")
                } else {
                    format!("{base}/v1beta/models/{model}:generateContent")
                }
            }
        }
    }

    /// The JSON body sent for `request`: the format's encoding (see
    /// [`WireFormat::encode_request`]) with this provider's model as `model`
    /// (Gemini names it in the URL instead), and `stream: true` when streaming
    /// (Chat Completions also `stream_options: {"include_usage": true}`;
    /// Gemini streams by URL, its body is unchanged).
    ///
    /// # Errors
    ///
    /// The encoder's error.
    pub fn request_body(&self, request: &ModelRequest) -> Result<Value, ProviderError> {
        let mut body = self.api.wire_format().encode_request(request)?;
        if let Some(map) = body.as_object_mut().filter(|_| self.api != Api::Gemini) {
            map.insert("model".into(), json!(self.model));
            if self.stream {
                map.insert("stream".into(), json!(true));
                if self.api == Api::OpenAi {
                    map.insert("stream_options".into(), json!({"include_usage": true}));
                }
            }
        }
        Ok(body)
    }

    async fn send(&self, request: &ModelRequest) -> Result<reqwest::Response, ProviderError> {
        let body = serde_json::to_vec(&self.request_body(request)?)
            .map_err(|e| ProviderError::Other(format!("cannot serialise the request: {e}")))?;
        let mut builder = self.client.post(self.endpoint()).headers(self.headers.clone()).body(body);
        if self.stream {
            builder = builder.header(reqwest::header::ACCEPT, "text/event-stream");
        }
        let response = builder.send().await.map_err(|e| ProviderError::Transport(error_chain(&e)))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = retry_after(response.headers());
        let bytes = response.bytes().await.unwrap_or_default();
        Err(ProviderError::Http {
            provider: self.api.scheme(),
            status: status.as_u16(),
            retry_after,
            body: cut(&String::from_utf8_lossy(&bytes), ERROR_BODY_LIMIT),
        })
    }

    async fn read_json(&self, response: reqwest::Response) -> Result<ModelResponse, ProviderError> {
        let format = self.api.wire_format();
        let bytes = response.bytes().await.map_err(|e| ProviderError::Transport(error_chain(&e)))?;
        let body: Value = serde_json::from_slice(&bytes).map_err(|e| ProviderError::Decode {
            provider: format.as_str(),
            what: format!("the body is not JSON: {e}"),
        })?;
        format.decode_response(&body)
    }

    /// Reads a streamed answer; `on_delta` (if any) gets each text and
    /// reasoning piece. A read that waits longer than the read timeout is
    /// [`ProviderError::Stalled`], `delivered` telling whether a piece was
    /// handed to `on_delta` before.
    async fn read_stream(
        &self,
        mut response: reqwest::Response,
        on_delta: Option<&(dyn Fn(Delta) + Send + Sync)>,
    ) -> Result<ModelResponse, ProviderError> {
        let format = self.api.wire_format();
        let mut decoder = SseDecoder::new();
        let mut assembler = format.stream_assembler();
        let mut delivered = false;
        loop {
            // reqwest's own read timeout is the same length; whichever fires first says "stalled".
            let read = tokio::time::timeout(self.read_timeout, response.chunk()).await;
            let chunk = match read {
                Ok(Ok(Some(chunk))) => chunk,
                Ok(Ok(None)) => break,
                Err(_) | Ok(Err(_)) if assembler.is_complete() => {
                    // After the final event a broken or silent connection changes nothing.
                    return assembler.finish();
                }
                Err(_) => return Err(self.stalled(delivered, assembler.partial_usage())),
                Ok(Err(e)) if e.is_timeout() => return Err(self.stalled(delivered, assembler.partial_usage())),
                Ok(Err(e)) => {
                    return Err(ProviderError::Truncated {
                        provider: format.as_str(),
                        what: format!("reading the stream failed: {}", error_chain(&e)),
                        partial_usage: assembler.partial_usage(),
                    });
                }
            };
            let events = decoder.feed(&chunk).map_err(|e| ProviderError::Decode {
                provider: format.as_str(),
                what: format!("the event stream: {e}"),
            })?;
            for event in &events {
                for delta in assembler.push(event)? {
                    if let Some(on_delta) = on_delta {
                        delivered = true;
                        on_delta(delta);
                    }
                }
            }
        }
        assembler.finish()
    }

    fn stalled(&self, delivered: bool, partial_usage: crate::model::Usage) -> ProviderError {
        ProviderError::Stalled {
            provider: self.api.wire_format().as_str(),
            idle_ms: u64::try_from(self.read_timeout.as_millis()).unwrap_or(u64::MAX),
            delivered,
            partial_usage,
        }
    }

    /// Sends `request` and reads the answer, streamed or not.
    async fn complete_with(
        &self,
        request: &ModelRequest,
        on_delta: Option<&(dyn Fn(Delta) + Send + Sync)>,
    ) -> Result<ModelResponse, ProviderError> {
        let response = self.send(request).await?;
        if self.stream && !is_json(&response) {
            self.read_stream(response, on_delta).await
        } else {
            self.read_json(response).await
        }
    }
}

/// `retry-after-ms` (OpenAI), else `retry-after` (seconds or HTTP date).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) =
        get("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()).filter(|ms| ms.is_finite() && *ms >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms.min(1e12) / 1000.0));
    }
    get("retry-after").and_then(|v| parse_retry_after(v, SystemTime::now()))
}

/// `text` cut to at most `limit` bytes on a character boundary.
fn cut(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// An error with its sources, `: `-joined (reqwest's own message is terse).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.trim_start().starts_with("application/json"))
}

#[async_trait]
impl ModelProvider for HttpProvider {
    /// The scheme: `anthropic`, `openai`, `openai-responses` or `gemini`.
    fn name(&self) -> &str {
        self.api.scheme()
    }

    fn model(&self) -> &str {
        &self.model
    }

    /// Sends one request (streamed or not, per [`HttpOptions::stream`]) and
    /// decodes the answer.
    ///
    /// # Errors
    ///
    /// [`ProviderError::Transport`] when the request cannot be sent or a
    /// non-streamed body cannot be read; [`ProviderError::Http`] for a
    /// non-2xx status (with `retry-after` and the body);
    /// [`ProviderError::Decode`] for a body or event that does not decode;
    /// [`ProviderError::StreamError`] for an error event;
    /// [`ProviderError::Truncated`] for a stream cut before its final event;
    /// [`ProviderError::Stalled`] for a stream silent for the read timeout.
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        self.complete_with(request, None).await
    }

    /// As [`HttpProvider::complete`], calling `on_delta` with every text and
    /// reasoning piece of a streamed answer as it arrives (nothing when not
    /// streaming, or when a server answered a streamed request with plain JSON).
    async fn complete_streaming(
        &self,
        request: &ModelRequest,
        on_delta: &(dyn Fn(Delta) + Send + Sync),
    ) -> Result<ModelResponse, ProviderError> {
        self.complete_with(request, Some(on_delta)).await
    }
}

#[cfg(test)]
mod tests;
