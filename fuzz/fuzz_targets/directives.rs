//! The host side of the plugin boundary: arbitrary directives, failures and
//! logs through the output checks and the chain's recording (see
//! `hookbox_fuzz::host`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hookbox_fuzz::host::directives(data));
