//! The SSE decoder: never panics, and the events do not depend on where the
//! byte stream is cut.
#![no_main]

use hookbox_fuzz::{cuts, sse_events};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (cuts, body) = cuts(data);
    let whole = sse_events(body, &[]);
    let pieces = sse_events(body, &cuts);
    assert_eq!(whole, pieces, "events depend on chunk boundaries");
    let every_byte: Vec<usize> = (1..body.len()).collect();
    assert_eq!(whole, sse_events(body, &every_byte), "events depend on chunk boundaries");
});
