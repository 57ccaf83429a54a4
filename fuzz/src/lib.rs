//! The stream decoders of Hookbox's `hookbox-providers` crate, driven by the
//! fuzz targets, and ([`host`]) the host side of the plugin boundary: the
//! output checks and the hook chain of `hookbox-sandbox`.

#![allow(missing_docs)]

pub mod host;

pub use hookbox_providers as provider;

use provider::sse::SseDecoder;
use provider::stream::StreamAssembler;

/// Splits `data` into a control byte and a body; the control byte picks up
/// to 8 cut points so the same body is also fed in pieces.
pub fn cuts(data: &[u8]) -> (Vec<usize>, &[u8]) {
    let Some((&control, body)) = data.split_first() else { return (Vec::new(), data) };
    let n = usize::from(control % 8);
    let mut cuts: Vec<usize> = (0..n)
        .map(|i| {
            if body.is_empty() {
                0
            } else {
                (usize::from(control).wrapping_mul(31).wrapping_add(i * 97)) % (body.len() + 1)
            }
        })
        .collect();
    cuts.sort_unstable();
    (cuts, body)
}

/// Feeds `body` to a fresh SSE decoder in pieces cut at `cuts`.
pub fn sse_events(body: &[u8], cuts: &[usize]) -> Option<Vec<provider::sse::SseEvent>> {
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain(std::iter::once(&body.len())) {
        events.extend(decoder.feed(&body[start..cut]).ok()?);
        start = cut;
    }
    Some(events)
}

/// Runs `body` (cut at `cuts`) through the SSE decoder and `assembler`; any
/// error is fine, a panic is the bug the fuzzer looks for. The result must
/// not depend on the cuts.
pub fn assemble(make: fn() -> Box<dyn StreamAssembler + Send>, data: &[u8]) {
    let (cuts, body) = cuts(data);
    let run = |cuts: &[usize]| {
        let events = sse_events(body, cuts)?;
        let mut assembler = make();
        for event in &events {
            if assembler.push(event).is_err() {
                return Some(None);
            }
        }
        Some(assembler.finish().ok())
    };
    assert_eq!(run(&cuts), run(&[]), "the result depends on chunk boundaries");
}
