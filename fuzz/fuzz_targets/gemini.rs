//! The gemini stream assembler behind the SSE decoder: never panics, and
//! the result does not depend on where the byte stream is cut.
#![no_main]

use hookbox_fuzz::assemble;
use hookbox_fuzz::provider::stream::GeminiStream;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    assemble(|| Box::new(GeminiStream::new()), data);
});
