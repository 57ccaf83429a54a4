//! Who is asking: the `Authorization: Bearer KEY` of every `/v1/` request,
//! resolved to a tenant ([`Caller`]) or the operator ([`Operator`]). A
//! missing, malformed or unknown key is 401; each request is counted
//! against its key's in-flight limit while it runs.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::error::ApiError;
use crate::fair_io::ConnTenant;
use crate::keys::{OPERATOR_PREFIX, TENANT_PREFIX, well_formed};
use crate::state::{AppState, InFlight};
use crate::store::{KeyOwner, Role, Tenant};

/// The header with which the operator key acts as a tenant's admin.
pub const TENANT_HEADER: &str = "x-hookbox-tenant";

/// A request on behalf of a tenant.
pub struct Caller {
    /// The tenant.
    pub tenant: Tenant,
    /// The key's role (`admin` for the operator acting as the tenant).
    pub role: Role,
    _in_flight: InFlight,
}

impl Caller {
    /// The request's count against its key, kept by a response that outlives
    /// the handler (an event stream), so open streams count too.
    pub fn into_in_flight(self) -> InFlight {
        self._in_flight
    }

    /// Errors with 403 unless the key is the tenant's admin.
    pub fn require_admin(&self, what: &str) -> Result<(), ApiError> {
        if self.role == Role::Admin {
            Ok(())
        } else {
            Err(ApiError::forbidden(format!("only a tenant admin key may {what}")))
        }
    }
}

/// A request with the operator key.
pub struct Operator {
    _in_flight: InFlight,
}

/// Records on the request's connection whose request it carries (`None`:
/// the operator's, which is never held), so its next reads wait while that
/// tenant floods (crate::fair_io).
fn note_conn(parts: &Parts, tenant: Option<i64>) {
    if let Some(conn) = parts.extensions.get::<Arc<ConnTenant>>() {
        conn.set(tenant);
    }
}

/// The key of `parts` and its owner. Errors: 401, or 429 for too many in flight.
async fn resolve(parts: &Parts, state: &Arc<AppState>) -> Result<(KeyOwner, InFlight), ApiError> {
    let header = parts.headers.get(axum::http::header::AUTHORIZATION).ok_or_else(ApiError::unauthorized)?;
    let key = header
        .to_str()
        .ok()
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or_else(ApiError::unauthorized)?;
    if !well_formed(key, TENANT_PREFIX) && !well_formed(key, OPERATOR_PREFIX) {
        return Err(ApiError::unauthorized());
    }
    let hash = state.hasher.hash(key);
    let owner = match state.keys.get(&hash) {
        Some(owner) => owner,
        None => {
            let h = hash.clone();
            let owner = state.db(move |s| s.key_owner(&h)).await?.ok_or_else(ApiError::unauthorized)?;
            state.keys.put(hash.clone(), owner.clone());
            owner
        }
    };
    // Counted per tenant: a tenant's admin can make any number of keys.
    let scope = match &owner.tenant {
        Some(t) => format!("tenant:{}", t.id),
        None => format!("key:{hash}"),
    };
    let guard = state.enter(&scope)?;
    Ok((owner, guard))
}

impl FromRequestParts<Arc<AppState>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<AppState>) -> Result<Self, Self::Rejection> {
        let (owner, guard) = resolve(parts, state).await?;
        match (owner.tenant, owner.role) {
            (Some(tenant), role) => {
                note_conn(parts, Some(tenant.id));
                Ok(Caller { tenant, role, _in_flight: guard })
            }
            (None, _) => {
                let name = parts
                    .headers
                    .get(TENANT_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| {
                        ApiError::bad_request(
                            "the operator key acts as a tenant with the header X-Hookbox-Tenant: NAME",
                        )
                    })?
                    .to_string();
                let tenant = state.db(move |s| s.tenant(&name)).await?.ok_or_else(|| ApiError::not_found("tenant"))?;
                note_conn(parts, None);
                Ok(Caller { tenant, role: Role::Admin, _in_flight: guard })
            }
        }
    }
}

impl FromRequestParts<Arc<AppState>> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<AppState>) -> Result<Self, Self::Rejection> {
        let (owner, guard) = resolve(parts, state).await?;
        if owner.role != Role::Operator {
            // A tenant key does not learn that admin routes exist.
            return Err(ApiError::not_found("route"));
        }
        note_conn(parts, None);
        Ok(Operator { _in_flight: guard })
    }
}
