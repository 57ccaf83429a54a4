//! The server's errors: [`ServerError`] for starting and running it, and
//! [`ApiError`], what a request gets back (a status and a JSON body that
//! says what was wrong, never the internals of another tenant).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// What can stop the server from starting or keep it from working.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// `server.toml` is not valid.
    #[error("server config: {0}")]
    Config(String),
    /// The database could not be opened, read or written.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// A file or socket operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The hook runtime could not be built.
    #[error("hook runtime: {0}")]
    Runtime(#[from] hookbox::sandbox::LoadError),
    /// A blocking task died.
    #[error("internal: {0}")]
    Internal(String),
}

/// Why the store could not answer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The SQLite database failed.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL failed (or its connection did).
    #[error("postgres: {0}")]
    Postgres(#[from] ::postgres::Error),
    /// The store's workers are gone, or a stored value is malformed.
    #[error("store: {0}")]
    Unavailable(String),
    /// This worker no longer owns the run it wrote to: its lease lapsed and
    /// another worker marked the run `interrupted` (nothing was written).
    #[error("fenced: {0}")]
    Fenced(String),
}

/// The JSON body of every error answer: `{"error": CODE, "message": TEXT}`,
/// plus `quota`, `limit` and `used` for a 429 over a quota.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// A stable code: `bad_request`, `unauthorized`, `forbidden`,
    /// `not_found`, `method_not_allowed`, `conflict`, `too_large`, `timeout`,
    /// `unsupported_media_type`, `quota`, `too_many_requests`,
    /// `unprocessable`, `unavailable` or `internal`.
    pub error: &'static str,
    /// What was wrong, for a person.
    pub message: String,
    /// The quota that was reached (429 `quota` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<&'static str>,
    /// The quota's limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<f64>,
    /// What the tenant uses of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used: Option<f64>,
}

/// An error answer: a status and an [`ErrorBody`].
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The body.
    pub body: ErrorBody,
}

impl ApiError {
    fn new(status: StatusCode, error: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, body: ErrorBody { error, message: message.into(), quota: None, limit: None, used: None } }
    }

    /// 400: the request is malformed.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 401: no valid key.
    pub fn unauthorized() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", "send a valid key as `Authorization: Bearer KEY`")
    }

    /// 403: the key is valid but its role may not do this.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// 404: no such object for this tenant (another tenant's objects are 404 too).
    pub fn not_found(what: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", format!("no such {what}"))
    }

    /// 409: the object is not in a state that allows this.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 413: the body is over its limit.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
    }

    /// 422: well-formed but refused (a component that does not load, a limit over the tenant's maximum).
    pub fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "unprocessable", message)
    }

    /// 429 over the quota `quota`.
    pub fn quota(quota: &'static str, limit: f64, used: f64) -> Self {
        let mut e = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "quota",
            format!("over the tenant's `{quota}` quota ({used} of {limit})"),
        );
        e.body.quota = Some(quota);
        e.body.limit = Some(limit);
        e.body.used = Some(used);
        e
    }

    /// 408: the body did not arrive within `request_timeout_ms`.
    pub fn timeout() -> Self {
        Self::new(StatusCode::REQUEST_TIMEOUT, "timeout", "the request body did not arrive in time")
    }

    /// 429: too many requests in flight for one key.
    pub fn too_many_requests(message: impl Into<String>) -> Self {
        Self::new(StatusCode::TOO_MANY_REQUESTS, "too_many_requests", message)
    }

    /// 503: the server is shutting down, or its database cannot be reached.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    /// 500: logged with its cause; the client gets no internals.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!("internal error: {cause}");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error (logged)")
    }
}

impl From<ServerError> for ApiError {
    fn from(e: ServerError) -> Self {
        ApiError::internal(e)
    }
}

impl From<rusqlite::Error> for ApiError {
    fn from(e: rusqlite::Error) -> Self {
        ApiError::internal(e)
    }
}

impl StoreError {
    /// True when the database cannot be reached now (a connection lost or
    /// refused, a server shutting down or restarting: SQLSTATE class 57), so
    /// the same request may succeed in a moment.
    pub fn is_connection_lost(&self) -> bool {
        let StoreError::Postgres(e) = self else { return false };
        e.is_closed() || e.as_db_error().is_none_or(|d| d.code().code().starts_with("57P"))
    }
}

impl From<StoreError> for ApiError {
    /// A 503 while the database cannot be reached (try again), else a 500.
    fn from(e: StoreError) -> Self {
        if e.is_connection_lost() {
            tracing::warn!("the database is unavailable: {e}");
            return ApiError::unavailable("the database is unavailable; try again shortly");
        }
        ApiError::internal(e)
    }
}

impl From<rusqlite::Error> for ServerError {
    fn from(e: rusqlite::Error) -> Self {
        ServerError::Store(e.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body)).into_response()
    }
}

/// A handler's result.
pub type ApiResult<T> = Result<T, ApiError>;
