//! A connection that reads its next request only when its tenant may send
//! one ([`FairRead`]). Until a request's `Authorization` header is parsed,
//! nothing tells one tenant's request from another's; so a tenant flooding
//! over many keep-alive connections would have the server read, parse and
//! queue all of its requests, and another tenant's request would wait
//! behind that work to be read at all. Each connection therefore remembers
//! the tenant of its last request ([`ConnTenant`], set by the `Caller`
//! extractor), and its reads wait while [`FairGate::hold_reads`] says that
//! tenant already has enough calls queued. A connection's first request is
//! always read; a held connection holds nothing but its socket.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::futures::OwnedNotified;

use crate::fair::FairGate;

/// The tenant whose request a connection carried last (none yet: -1).
#[derive(Debug)]
pub struct ConnTenant(AtomicI64);

impl ConnTenant {
    /// A connection that has carried no request yet.
    pub fn new() -> Arc<Self> {
        Arc::new(ConnTenant(AtomicI64::new(-1)))
    }

    /// Records that the connection's request came from `tenant`.
    pub fn set(&self, tenant: i64) {
        self.0.store(tenant, Ordering::Relaxed);
    }

    fn get(&self) -> Option<i64> {
        Some(self.0.load(Ordering::Relaxed)).filter(|t| *t >= 0)
    }
}

/// A stream whose reads wait while its tenant's calls are queued in the
/// gate; writes pass through.
pub struct FairRead<S> {
    inner: S,
    tenant: Arc<ConnTenant>,
    gate: Arc<FairGate>,
    /// Set while held: completes when the gate lets this connection read.
    held: Option<Pin<Box<OwnedNotified>>>,
}

impl<S> FairRead<S> {
    /// `inner`, read on behalf of whatever tenant `tenant` names.
    pub fn new(inner: S, tenant: Arc<ConnTenant>, gate: Arc<FairGate>) -> Self {
        FairRead { inner, tenant, gate, held: None }
    }

    /// Ready when the connection may read: its tenant is unknown or has
    /// room in the gate, or the gate let it go since it was held.
    fn poll_hold(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if let Some(held) = self.held.as_mut() {
            ready!(held.as_mut().poll(cx));
            self.held = None;
            return Poll::Ready(());
        }
        let Some(tenant) = self.tenant.get() else { return Poll::Ready(()) };
        loop {
            let Some(notify) = self.gate.hold_reads(tenant) else { return Poll::Ready(()) };
            let mut held = Box::pin(notify.clone().notified_owned());
            held.as_mut().enable();
            // Asked again with the waiter registered, so a notification
            // between the two asks is not lost; a different `Notify` means
            // the queue emptied and filled again meanwhile: ask anew.
            match self.gate.hold_reads(tenant) {
                None => return Poll::Ready(()),
                Some(now) if Arc::ptr_eq(&now, &notify) => {
                    if held.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(());
                    }
                    self.held = Some(held);
                    return Poll::Pending;
                }
                Some(_) => continue,
            }
        }
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
    use crate::fair::READ_AHEAD;

    /// A connection of `tenant` (`None`: no request yet) with `bytes` sent to it.
    async fn conn(
        gate: &Arc<FairGate>,
        tenant: Option<i64>,
        bytes: &[u8],
    ) -> (FairRead<tokio::io::DuplexStream>, tokio::io::DuplexStream) {
        let (ours, mut theirs) = tokio::io::duplex(64);
        theirs.write_all(bytes).await.unwrap_or_else(|e| panic!("{e}"));
        let t = ConnTenant::new();
        if let Some(id) = tenant {
            t.set(id);
        }
        (FairRead::new(ours, t, gate.clone()), theirs)
    }

    /// True when one byte can be read within 100 ms.
    async fn reads(c: &mut FairRead<tokio::io::DuplexStream>) -> bool {
        let mut b = [0u8; 1];
        matches!(tokio::time::timeout(Duration::from_millis(100), c.read(&mut b)).await, Ok(Ok(1)))
    }

    #[tokio::test]
    async fn a_flooding_tenants_connections_read_only_as_its_queue_drains() {
        let gate = FairGate::new(1);
        let running = gate.enter(7).await;
        // Tenant 7 runs one call and queues READ_AHEAD more: its connections are held.
        let mut queued = Vec::new();
        for _ in 0..READ_AHEAD + 1 {
            let g = gate.clone();
            queued.push(tokio::spawn(async move { g.enter(7).await }));
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
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
        // The queue empties: every held connection reads.
        drop(running);
        for q in queued {
            q.abort();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(reads(&mut held2).await, "the queue is empty: no connection is held");
    }
}
