//! The fuzz crate's harnesses (`fuzz/src`), compiled into the test suite and
//! fed seeded pseudo-random inputs on every CI run: the same checks as
//! `cargo +nightly fuzz run` (no panic; a stream's result does not depend on
//! its chunk boundaries; a directive that passes the output checks is
//! within the caps, and the chain records it as the contract says), without
//! coverage guidance. It keeps the harnesses compiling and catches what
//! random bytes and mutated recordings reach; real fuzzing is in `fuzz/README.md`.

#[allow(clippy::unwrap_used, clippy::expect_used, dead_code)]
#[path = "../../fuzz/src/lib.rs"]
mod fuzz;

use fuzz::provider::stream::{AnthropicStream, GeminiStream, OpenAiChatStream, ResponsesStream, StreamAssembler};

/// A small deterministic generator (xorshift64*), so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn bytes(&mut self, max: usize) -> Vec<u8> {
        let len = (self.next() as usize) % (max + 1);
        (0..len).map(|_| self.next() as u8).collect()
    }
}

#[test]
fn the_directives_harness_holds_on_random_inputs() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    for _ in 0..20_000 {
        fuzz::host::directives(&rng.bytes(4_096));
    }
}

/// The recorded provider streams, with a cut byte in front and a few bytes
/// flipped, through every assembler.
#[test]
fn the_stream_harnesses_hold_on_mutated_recordings() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/providers/testdata/provider-recordings");
    let mut recordings: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "sse")).collect::<Vec<_>>()
        })
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .into_iter()
        .map(|p: std::path::PathBuf| std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect();
    recordings.sort();
    assert!(recordings.len() >= 5, "the recordings are there: {}", recordings.len());
    let makers: [fn() -> Box<dyn StreamAssembler + Send>; 4] = [
        || Box::new(AnthropicStream::new()),
        || Box::new(OpenAiChatStream::new()),
        || Box::new(ResponsesStream::new()),
        || Box::new(GeminiStream::new()),
    ];
    let mut rng = Rng(0x5eed_1234_abcd_0002);
    for recording in &recordings {
        for round in 0..40 {
            let mut data = vec![rng.next() as u8];
            data.extend_from_slice(recording);
            // Round 0 is the recording as it is; later rounds flip a few bytes.
            for _ in 0..round.min(4) {
                let at = 1 + (rng.next() as usize) % recording.len().max(1);
                if let Some(b) = data.get_mut(at) {
                    *b = rng.next() as u8;
                }
            }
            for make in makers {
                fuzz::assemble(make, &data);
            }
            let (cuts, body) = fuzz::cuts(&data);
            assert_eq!(fuzz::sse_events(body, &cuts), fuzz::sse_events(body, &[]), "SSE events depend on the cuts");
        }
    }
    for _ in 0..2_000 {
        let data = rng.bytes(512);
        for make in makers {
            fuzz::assemble(make, &data);
        }
    }
}
