//! [`RetryPolicy`]: when and how long to wait before sending a failed model
//! request again.
//!
//! Providers never retry by themselves; the agent loop owns the loop (so it
//! can fire `request-start` for every attempt) and asks
//! [`RetryPolicy::retry_delay`] after each failure:
//!
//! ```no_run
//! # use hookbox_providers::retry::RetryPolicy;
//! # use hookbox_providers::{ModelProvider, ModelRequest, ModelResponse, ProviderError};
//! # async fn send(p: &dyn ModelProvider, req: &ModelRequest) -> Result<ModelResponse, ProviderError> {
//! let policy = RetryPolicy::default();
//! let mut attempt = 1;
//! loop {
//!     match p.complete(req).await {
//!         Ok(r) => return Ok(r),
//!         Err(e) => match policy.retry_delay(&e, attempt, &mut rand::rng()) {
//!             Some(wait) => tokio::time::sleep(wait).await,
//!             None => return Err(e),
//!         },
//!     }
//!     attempt += 1;
//! }
//! # }
//! ```
//!
//! What is retried follows the providers' own guidance: Anthropic
//! (<https://docs.anthropic.com/en/api/errors>: 429 `rate_limit_error`, 500
//! `api_error`, 529 `overloaded_error`), OpenAI
//! (<https://platform.openai.com/docs/guides/error-codes>: 429, 500, 503) and
//! Gemini (<https://ai.google.dev/gemini-api/docs/troubleshooting>: 429
//! `RESOURCE_EXHAUSTED`, 500, 503, 504): 408, 409, 429, every 5xx, 529,
//! transport errors, stream error events whose documented status is one
//! of those, and a stream that stalled before it handed out any text. The wait honours `retry-after`; otherwise it is exponential
//! backoff with full jitter (AWS Architecture Blog, "Exponential Backoff And
//! Jitter": a uniform random wait between 0 and `min(max_delay, base_delay ·
//! 2^(attempt-1))`).

use std::time::Duration;

use rand::{Rng, RngExt};

use crate::model::ProviderError;

/// How often and how long to retry failed model requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = never retry). Default 4.
    pub max_attempts: u32,
    /// The backoff cap of the first retry; doubles with every attempt.
    /// Default 500 ms.
    pub base_delay: Duration,
    /// The longest wait: the backoff cap never grows past it, and a
    /// `retry-after` longer than it is not waited for (the error is returned).
    /// Default 30 s.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { max_attempts: 4, base_delay: Duration::from_millis(500), max_delay: Duration::from_secs(30) }
    }
}

/// Whether an HTTP status is worth retrying: 408 (timeout), 409 (conflict,
/// retried by the OpenAI and Anthropic SDKs), 429 (rate limit), any 5xx, and
/// 529 (Anthropic overloaded).
pub fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429 | 500..=599)
}

/// Whether `err` is transient: see [`is_retryable_status`]; transport errors
/// are; so is a stream that stalled ([`ProviderError::Stalled`]) before any
/// of its text or reasoning was handed to the caller (nothing reached the
/// caller, hooks see a response only once it is whole, so sending the
/// request again takes nothing back). A stalled stream that already handed
/// out pieces is not, nor is a cut stream ([`ProviderError::Truncated`]: the
/// server ended it, the caller decides), a decode error or anything else.
pub fn is_retryable(err: &ProviderError) -> bool {
    match err {
        ProviderError::Http { status, .. } => is_retryable_status(*status),
        ProviderError::StreamError { status: Some(status), .. } => is_retryable_status(*status),
        ProviderError::Transport(_) => true,
        ProviderError::Stalled { delivered, .. } => !delivered,
        _ => false,
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn none() -> Self {
        RetryPolicy { max_attempts: 1, ..Self::default() }
    }

    /// How long to wait before attempt `attempt + 1`, after attempt `attempt`
    /// (1-based) failed with `err`; `None` to give up: the error is not
    /// retryable ([`is_retryable`]), `attempt` reached `max_attempts`, or the
    /// provider's `retry-after` is longer than `max_delay`.
    ///
    /// With a `retry-after` (an [`ProviderError::Http`] field) the wait is
    /// exactly that; otherwise it is uniform in `[0, min(max_delay,
    /// base_delay · 2^(attempt-1))]` drawn from `rng`.
    pub fn retry_delay<R: Rng + ?Sized>(&self, err: &ProviderError, attempt: u32, rng: &mut R) -> Option<Duration> {
        if attempt >= self.max_attempts || !is_retryable(err) {
            return None;
        }
        if let ProviderError::Http { retry_after: Some(wait), .. } = err {
            return (*wait <= self.max_delay).then_some(*wait);
        }
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1).min(31));
        let cap = self.base_delay.saturating_mul(factor).min(self.max_delay);
        let nanos = u64::try_from(cap.as_nanos()).unwrap_or(u64::MAX);
        Some(Duration::from_nanos(rng.random_range(0..=nanos)))
    }
}

/// Parses a `retry-after` header value: delay-seconds (a non-negative
/// integer, fractions accepted) or an HTTP-date (RFC 9110 section 10.2.3),
/// the latter relative to `now` (a date in the past is zero). `None` when
/// the value is neither.
pub fn parse_retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(1e9)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Usage;
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use std::time::UNIX_EPOCH;

    fn http(status: u16, retry_after: Option<Duration>) -> ProviderError {
        ProviderError::Http { provider: "anthropic", status, retry_after, body: String::new() }
    }

    #[test]
    fn defaults() {
        let p = RetryPolicy::default();
        assert_eq!(
            (p.max_attempts, p.base_delay, p.max_delay),
            (4, Duration::from_millis(500), Duration::from_secs(30))
        );
    }

    #[test]
    fn what_is_retried() {
        let p = RetryPolicy::default();
        let mut rng = StdRng::seed_from_u64(1);
        for status in [408, 409, 429, 500, 502, 503, 504, 529] {
            assert!(p.retry_delay(&http(status, None), 1, &mut rng).is_some(), "{status}");
        }
        for status in [400, 401, 403, 404, 413, 422] {
            assert!(p.retry_delay(&http(status, None), 1, &mut rng).is_none(), "{status}");
        }
        assert!(p.retry_delay(&ProviderError::Transport("reset".into()), 1, &mut rng).is_some());
        let stream = |status| ProviderError::StreamError {
            provider: "anthropic-messages",
            kind: "overloaded_error".into(),
            message: String::new(),
            status,
            partial_usage: Usage::default(),
        };
        assert!(p.retry_delay(&stream(Some(529)), 1, &mut rng).is_some());
        assert!(p.retry_delay(&stream(None), 1, &mut rng).is_none());
        let cut = ProviderError::Truncated { provider: "gemini", what: String::new(), partial_usage: Usage::default() };
        assert!(p.retry_delay(&cut, 1, &mut rng).is_none());
        let stalled = |delivered| ProviderError::Stalled {
            provider: "openai-chat",
            idle_ms: 100,
            delivered,
            partial_usage: Usage::default(),
        };
        assert!(p.retry_delay(&stalled(false), 1, &mut rng).is_some(), "nothing handed out: retried");
        assert!(p.retry_delay(&stalled(true), 1, &mut rng).is_none(), "text already streamed: not retried");
        let decode = ProviderError::Decode { provider: "gemini", what: String::new() };
        assert!(p.retry_delay(&decode, 1, &mut rng).is_none());
    }

    #[test]
    fn gives_up_after_max_attempts() {
        let p = RetryPolicy::default();
        let mut rng = StdRng::seed_from_u64(2);
        for attempt in 1..4 {
            assert!(p.retry_delay(&http(503, None), attempt, &mut rng).is_some(), "{attempt}");
        }
        assert!(p.retry_delay(&http(503, None), 4, &mut rng).is_none());
        assert!(RetryPolicy::none().retry_delay(&http(503, None), 1, &mut rng).is_none());
    }

    #[test]
    fn honours_retry_after_up_to_max_delay() {
        let p = RetryPolicy::default();
        let mut rng = StdRng::seed_from_u64(3);
        let wait = Duration::from_millis(1_234);
        assert_eq!(p.retry_delay(&http(429, Some(wait)), 1, &mut rng), Some(wait));
        assert_eq!(p.retry_delay(&http(429, Some(Duration::ZERO)), 3, &mut rng), Some(Duration::ZERO));
        assert_eq!(p.retry_delay(&http(429, Some(Duration::from_secs(31))), 1, &mut rng), None);
    }

    #[test]
    fn full_jitter_stays_within_the_exponential_cap() {
        let p = RetryPolicy { max_attempts: 40, ..RetryPolicy::default() };
        let mut rng = StdRng::seed_from_u64(4);
        for attempt in 1..40u32 {
            let cap = Duration::from_millis(500).saturating_mul(2u32.saturating_pow(attempt - 1)).min(p.max_delay);
            let mut max_seen = Duration::ZERO;
            for _ in 0..200 {
                let d = p.retry_delay(&http(500, None), attempt, &mut rng).unwrap();
                assert!(d <= cap, "attempt {attempt}: {d:?} > {cap:?}");
                max_seen = max_seen.max(d);
            }
            // Jitter spreads over the whole range.
            assert!(max_seen > cap / 2, "attempt {attempt}: {max_seen:?}");
        }
        // Seeded: the same sequence every time.
        let a: Vec<_> = (1..4).map(|n| p.retry_delay(&http(500, None), n, &mut StdRng::seed_from_u64(9))).collect();
        let b: Vec<_> = (1..4).map(|n| p.retry_delay(&http(500, None), n, &mut StdRng::seed_from_u64(9))).collect();
        assert_eq!(a, b);
    }

    #[test]
    fn parses_retry_after_seconds_and_dates() {
        let now = UNIX_EPOCH + Duration::from_secs(1_445_412_480); // Wed, 21 Oct 2015 07:28:00 GMT
        assert_eq!(parse_retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("1.5", now), Some(Duration::from_millis(1_500)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now), Some(Duration::from_secs(30)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("-1", now), None);
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("NaN", now), None);
    }
}
