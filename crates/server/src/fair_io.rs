//! A connection that reads its next request only when its tenant may send
//! one ([`FairRead`]). Until a request's `Authorization` header is parsed,
//! nothing tells one tenant's request from another's; so a tenant flooding
//! over many keep-alive connections would have the server read, parse and
//! queue all of its requests, and another tenant's request would wait
//! behind that work to be read at all. Each connection therefore remembers
//! the tenant of its requests ([`ConnTenant`], set by the `Caller`
//! extractor), and between two requests its reads wait while
//! [`FairGate::hold_reads`] says that tenant already has enough calls
//! queued.
//!
//! What is never held: a connection's first request; a connection with a
//! request in flight (its body, and hyper's reads that notice a client
//! that hung up, go on); a connection that carried two tenants' requests
//! (a proxy's pooled connection) or the operator's; and any hold longer
//! than its cap (at most 1 s and half the header timeout, so a held
//! request is read before hyper's header timeout could drop it). A flood
//! that opens a connection per request is not held: the connection and
//! in-flight limits bound it instead.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::futures::OwnedNotified;

use crate::fair::FairGate;

/// No request yet.
const NONE: i64 = -1;
/// Requests of two tenants, or the operator's: never held.
const MIXED: i64 = -2;

/// The tenant whose requests a connection carries, and how many of them
/// are in flight (begun, response not yet sent).
#[derive(Debug)]
pub struct ConnTenant {
    tenant: AtomicI64,
    in_flight: AtomicUsize,
}

impl ConnTenant {
    /// A connection that has carried no request yet.
    pub fn new() -> Arc<Self> {
        Arc::new(ConnTenant { tenant: AtomicI64::new(NONE), in_flight: AtomicUsize::new(0) })
    }

    /// Records that the connection's request came from `tenant` (`None`:
    /// the operator). A second tenant makes the connection mixed for good.
    pub fn set(&self, tenant: Option<i64>) {
        let new = tenant.filter(|t| *t >= 0).unwrap_or(MIXED);
        let _ = self.tenant.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| match old {
            NONE => Some(new),
            o if o == new => None,
            _ => Some(MIXED),
        });
    }

    /// A request on the connection began; the [`RequestEnd`] ends it when dropped.
    pub fn begin(self: &Arc<Self>) -> RequestEnd {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        RequestEnd(self.clone())
    }

    /// The tenant whose next request may be held: known, not mixed, and
    /// with no request of the connection in flight.
    fn holdable(&self) -> Option<i64> {
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            return None;
        }
        Some(self.tenant.load(Ordering::Relaxed)).filter(|t| *t >= 0)
    }
}

/// Ends a request of a connection when dropped (with its response body,
/// once the response is sent or abandoned).
#[derive(Debug)]
pub struct RequestEnd(Arc<ConnTenant>);

impl Drop for RequestEnd {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A response body that ends its request ([`RequestEnd`]) when dropped.
pub struct Ended<B> {
    inner: B,
    _end: RequestEnd,
}

impl<B> Ended<B> {
    /// `inner`, ending the request of `end` when it is dropped.
    pub fn new(inner: B, end: RequestEnd) -> Self {
        Ended { inner, _end: end }
    }
}

impl<B: http_body::Body + Unpin> http_body::Body for Ended<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The longest a connection is held at once, for a header timeout of
/// `header_timeout`: half of it, at most 1 s.
pub fn max_hold(header_timeout: Duration) -> Duration {
    (header_timeout / 2).min(Duration::from_secs(1))
}

/// A hold: the gate's notification, and the hold's cap.
type Held = (Pin<Box<OwnedNotified>>, Pin<Box<tokio::time::Sleep>>);

/// A stream whose reads between requests wait while its tenant's calls are
/// queued in the gate; writes pass through.
pub struct FairRead<S> {
    inner: S,
    tenant: Arc<ConnTenant>,
    gate: Arc<FairGate>,
    max_hold: Duration,
    /// Set while held: completes when the gate lets this connection read,
    /// or when the hold's cap runs out.
    held: Option<Held>,
}

impl<S> FairRead<S> {
    /// `inner`, read on behalf of whatever tenant `tenant` names; a hold
    /// lasts at most `max_hold`.
    pub fn new(inner: S, tenant: Arc<ConnTenant>, gate: Arc<FairGate>, max_hold: Duration) -> Self {
        FairRead { inner, tenant, gate, max_hold, held: None }
    }

    /// Ready when the connection may read: nothing to hold it for, room in
    /// the gate, or the gate (or the cap) let it go since it was held.
    fn poll_hold(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if let Some((held, cap)) = self.held.as_mut() {
            if held.as_mut().poll(cx).is_pending() && cap.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.held = None;
            return Poll::Ready(());
        }
        let Some(tenant) = self.tenant.holdable() else { return Poll::Ready(()) };
        let Some(mut held) = self.gate.hold_reads(tenant) else { return Poll::Ready(()) };
        if held.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        let mut cap = Box::pin(tokio::time::sleep(self.max_hold));
        if cap.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        self.held = Some((held, cap));
        Poll::Pending
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for FairRead<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_hold(cx));
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for FairRead<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::fair::{READ_AHEAD, Ticket};

    type Conn = FairRead<tokio::io::DuplexStream>;

    /// A connection whose requests came from `tenants` in turn (`None`: the
    /// operator), with `bytes` sent to it; held at most `cap`.
    async fn conn_of(
        gate: &Arc<FairGate>,
        tenants: &[Option<i64>],
        bytes: &[u8],
        cap: Duration,
    ) -> (Conn, tokio::io::DuplexStream) {
        let (ours, mut theirs) = tokio::io::duplex(64);
        theirs.write_all(bytes).await.unwrap_or_else(|e| panic!("{e}"));
        let t = ConnTenant::new();
        for tenant in tenants {
            t.set(*tenant);
        }
        (FairRead::new(ours, t, gate.clone(), cap), theirs)
    }

    async fn conn(gate: &Arc<FairGate>, tenant: Option<i64>, bytes: &[u8]) -> (Conn, tokio::io::DuplexStream) {
        let tenants: Vec<Option<i64>> = tenant.into_iter().map(Some).collect();
        conn_of(gate, &tenants, bytes, Duration::from_secs(30)).await
    }

    /// True when one byte can be read within `ms`.
    async fn reads_within(c: &mut Conn, ms: u64) -> bool {
        let mut b = [0u8; 1];
        matches!(tokio::time::timeout(Duration::from_millis(ms), c.read(&mut b)).await, Ok(Ok(1)))
    }

    async fn reads(c: &mut Conn) -> bool {
        reads_within(c, 100).await
    }

    /// Tenant `t` runs one call of a one-slot gate and queues `n` more.
    async fn flood(gate: &Arc<FairGate>, t: i64, n: usize) -> (Ticket, Vec<tokio::task::JoinHandle<Ticket>>) {
        let running = gate.enter(t).await;
        let mut queued = Vec::new();
        for _ in 0..n {
            let g = gate.clone();
            queued.push(tokio::spawn(async move { g.enter(t).await }));
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        (running, queued)
    }

    #[tokio::test]
    async fn a_flooding_tenants_connections_read_only_as_its_queue_drains() {
        let gate = FairGate::new(1);
        let (running, mut queued) = flood(&gate, 7, READ_AHEAD + 1).await;
        let (mut held, _a) = conn(&gate, Some(7), b"xx").await;
        let (mut held2, _b) = conn(&gate, Some(7), b"yy").await;
        assert!(!reads(&mut held).await, "tenant 7 has {} calls queued: its connection must wait", READ_AHEAD + 1);
        assert!(!reads(&mut held2).await);
        // Another tenant's connection, and one that carried no request yet, read at once.
        let (mut other, _c) = conn(&gate, Some(8), b"z").await;
        assert!(reads(&mut other).await);
        let (mut fresh, _d) = conn(&gate, None, b"z").await;
        assert!(reads(&mut fresh).await);
        // One call leaves the queue (its client went away): the oldest held connection reads once.
        queued.remove(0).abort();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(reads(&mut held).await, "a call left the queue: the first held connection may read");
        assert!(!reads(&mut held2).await, "only one connection is let go per call that leaves");
        drop(running);
        for q in queued {
            q.abort();
        }
    }

    #[tokio::test]
    async fn an_emptied_queue_lets_every_held_connection_read() {
        let gate = FairGate::new(1);
        let (running, queued) = flood(&gate, 7, READ_AHEAD).await;
        let mut held = Vec::new();
        for _ in 0..READ_AHEAD + 1 {
            let (mut c, other_end) = conn(&gate, Some(7), b"x").await;
            assert!(!reads(&mut c).await, "tenant 7's queue is full");
            held.push((c, other_end));
        }
        // Each call that leaves lets one go; the last one's leaving lets all go.
        for q in queued {
            q.abort();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        for (i, (c, _)) in held.iter_mut().enumerate() {
            assert!(reads(c).await, "connection {i} is still held with an empty queue");
        }
        drop(running);
    }

    #[tokio::test]
    async fn a_request_in_flight_a_mixed_or_operator_connection_and_a_long_hold_are_not_held() {
        let gate = FairGate::new(1);
        let (running, queued) = flood(&gate, 7, READ_AHEAD).await;
        // A request in flight reads on (its body; hyper's check for a client that hung up).
        let (mut c, _a) = conn(&gate, Some(7), b"xy").await;
        let end = c.tenant.begin();
        assert!(reads(&mut c).await, "a request in flight must read");
        drop(end);
        assert!(!reads(&mut c).await, "between requests, the connection is held");
        // Two tenants' requests, or the operator's: never held.
        let (mut mixed, _b) = conn_of(&gate, &[Some(7), Some(8), Some(7)], b"x", Duration::from_secs(30)).await;
        assert!(reads(&mut mixed).await, "a connection that carried two tenants' requests is not held");
        let (mut operator, _c) = conn_of(&gate, &[Some(7), None], b"x", Duration::from_secs(30)).await;
        assert!(reads(&mut operator).await, "the operator's connection is not held");
        // A hold ends at its cap, well before a header timeout could drop the request.
        let (mut capped, _d) = conn_of(&gate, &[Some(7)], b"x", Duration::from_millis(150)).await;
        assert!(!reads_within(&mut capped, 50).await, "held for now");
        assert!(reads_within(&mut capped, 1000).await, "the hold's cap ran out: the connection reads");
        assert_eq!(max_hold(Duration::from_secs(10)), Duration::from_secs(1));
        assert_eq!(max_hold(Duration::from_millis(300)), Duration::from_millis(150));
        drop(running);
        for q in queued {
            q.abort();
        }
    }
}
