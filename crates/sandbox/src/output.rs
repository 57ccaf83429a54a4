//! [`CappedPipe`]: where a guest's stdout and stderr go.
//!
//! wasmtime-wasi's `MemoryOutputPipe` reports a full pipe as closed, and Rust's
//! `println!` then panics the guest: verbose output would become a trap. This
//! pipe never refuses a write; it keeps the first `cap` bytes written since
//! the host last took its contents and counts the rest as dropped.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

#[derive(Debug, Default)]
struct Buffer {
    data: Vec<u8>,
    dropped: usize,
}

/// A capped, shared, in-memory output stream (clones share the buffer).
#[derive(Debug, Clone)]
pub(crate) struct CappedPipe {
    cap: usize,
    buffer: Arc<Mutex<Buffer>>,
}

impl CappedPipe {
    /// A pipe keeping at most `cap` bytes between two [`CappedPipe::take`]s.
    pub(crate) fn new(cap: usize) -> Self {
        CappedPipe { cap, buffer: Arc::default() }
    }

    /// Takes what was written since the last call, and how many bytes were dropped.
    pub(crate) fn take(&self) -> (Vec<u8>, usize) {
        match self.buffer.lock() {
            Ok(mut b) => (std::mem::take(&mut b.data), std::mem::take(&mut b.dropped)),
            Err(_) => (Vec::new(), 0),
        }
    }

    fn push(&self, bytes: &[u8]) {
        if let Ok(mut b) = self.buffer.lock() {
            let room = self.cap.saturating_sub(b.data.len());
            let kept = room.min(bytes.len());
            b.data.extend_from_slice(&bytes[..kept]);
            b.dropped += bytes.len() - kept;
        }
    }
}

impl OutputStream for CappedPipe {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        // Always writable: what does not fit is dropped, not refused.
        Ok(64 << 10)
    }
}

#[async_trait::async_trait]
impl Pollable for CappedPipe {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for CappedPipe {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.push(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

impl IsTerminal for CappedPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedPipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_cap_bytes_and_counts_the_rest() {
        let pipe = CappedPipe::new(5);
        let mut w = pipe.clone();
        assert!(w.write(Bytes::from_static(b"abc")).is_ok());
        assert!(w.write(Bytes::from_static(b"defgh")).is_ok());
        assert_eq!(w.check_write().ok(), Some(64 << 10), "never refuses");
        assert_eq!(pipe.take(), (b"abcde".to_vec(), 3));
        assert_eq!(pipe.take(), (Vec::new(), 0), "take resets");
        assert!(w.write(Bytes::from_static(b"xy")).is_ok());
        assert_eq!(pipe.take(), (b"xy".to_vec(), 0), "the cap is per take");
    }
}
