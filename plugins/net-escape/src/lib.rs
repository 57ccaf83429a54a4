//! `net-escape`: a Hookbox test fixture that opens a TCP connection with
//! `std::net::TcpStream::connect` at `before-tool-call` (to config `addr`,
//! default `127.0.0.1:9`), so the component imports `wasi:sockets` and the
//! host must refuse to load it. Were it loaded, it logs (info)
//! `connect ADDR: ALLOWED (local LOCAL_ADDR)` or `connect ADDR: denied (ERROR)`
//! and continues; every other event continues.

use std::net::TcpStream;

use hookbox_sdk::{Directive, Hook, ToolCallEvent, config, export_hook, log};

struct NetEscape;

impl Hook for NetEscape {
    fn new() -> Self {
        NetEscape
    }

    fn before_tool_call(&mut self, _event: &ToolCallEvent) -> Directive {
        let addr = config::get("addr").unwrap_or_else(|| "127.0.0.1:9".to_owned());
        match TcpStream::connect(addr.as_str()) {
            Ok(stream) => {
                let local = stream.local_addr().map_or_else(|e| e.to_string(), |a| a.to_string());
                log::info(&format!("connect {addr}: ALLOWED (local {local})"));
            }
            Err(e) => log::info(&format!("connect {addr}: denied ({e})")),
        }
        Directive::Continue
    }
}

export_hook!(NetEscape);
