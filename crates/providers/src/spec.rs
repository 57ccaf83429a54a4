//! [`model_from_spec`]: the provider a `--model` spec names.

use std::path::Path;
use std::sync::Arc;

use crate::http::{Api, HttpConfigError, HttpOptions, HttpProvider};
use crate::model::ModelProvider;
use crate::replay::{ReplayError, ReplayProvider};

/// Why a `--model` spec names no usable provider.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// `replay:` with no file.
    #[error("--model replay: names no file: use `replay:FILE`")]
    NoReplayFile,
    /// The replay session cannot be loaded.
    #[error("--model {spec}: {source}")]
    Replay {
        /// The spec as given.
        spec: String,
        /// Why the session cannot be used.
        #[source]
        source: ReplayError,
    },
    /// The live provider cannot be configured (a missing key, a bad base URL).
    #[error("--model {spec}: {source}")]
    Http {
        /// The spec as given.
        spec: String,
        /// What is missing or wrong.
        #[source]
        source: HttpConfigError,
    },
    /// No known scheme, or an empty model name.
    #[error(
        "unknown model spec `{spec}` (--model): expected `replay:FILE` (the offline replay provider), \
         `anthropic:MODEL`, `openai:MODEL`, `openai-responses:MODEL` or `gemini:MODEL`"
    )]
    Unknown {
        /// The spec as given.
        spec: String,
    },
}

/// The provider `spec` names.
///
/// `replay:FILE` plays back a recorded session (offline); `anthropic:MODEL`,
/// `openai:MODEL`, `openai-responses:MODEL` and `gemini:MODEL` are the live
/// APIs ([`crate::http`]), streaming, with the key from `ANTHROPIC_API_KEY` /
/// `OPENAI_API_KEY` / `GEMINI_API_KEY` and the base URL from `base_url`, else
/// `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL` / `GEMINI_BASE_URL`, else the
/// public default.
///
/// Errors: an unknown scheme or an empty model or file, a replay file that
/// cannot be loaded, a live API without its key (naming the variable) or
/// with a bad base URL.
pub fn model_from_spec(spec: &str, base_url: Option<&str>) -> Result<Arc<dyn ModelProvider>, SpecError> {
    model_from_spec_with(spec, HttpOptions { base_url: base_url.map(str::to_owned), ..HttpOptions::default() })
}

/// As [`model_from_spec`], with every option of a live provider (base URL,
/// connect and read timeouts, streaming); `replay:` ignores them.
///
/// Errors: as [`model_from_spec`].
pub fn model_from_spec_with(spec: &str, options: HttpOptions) -> Result<Arc<dyn ModelProvider>, SpecError> {
    let live = spec
        .split_once(':')
        .and_then(|(scheme, model)| Some((Api::from_scheme(scheme)?, model.trim())).filter(|(_, m)| !m.is_empty()));
    match (spec.split_once(':'), live) {
        (Some(("replay", "")), _) => Err(SpecError::NoReplayFile),
        (Some(("replay", file)), _) => match ReplayProvider::from_file(Path::new(file)) {
            Ok(provider) => Ok(Arc::new(provider)),
            Err(source) => Err(SpecError::Replay { spec: spec.to_string(), source }),
        },
        (_, Some((api, model))) => match HttpProvider::new(api, model, options) {
            Ok(provider) => Ok(Arc::new(provider)),
            Err(source) => Err(SpecError::Http { spec: spec.to_string(), source }),
        },
        _ => Err(SpecError::Unknown { spec: spec.to_string() }),
    }
}
