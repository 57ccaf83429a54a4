//! A byte-level Server-Sent Events decoder.
//!
//! Implements the parsing rules of the WHATWG HTML standard, "Server-sent
//! events", section 9.2.6 "Interpreting an event stream"
//! (<https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation>),
//! which every provider's streaming API (Anthropic, OpenAI Chat Completions and
//! Responses, Gemini `?alt=sse`) follows:
//!
//! * lines end with `\r\n`, `\n` or a lone `\r`;
//! * a line starting with `:` is a comment and is ignored;
//! * `field: value` (one space after the colon is dropped; a line without a
//!   colon is a field with an empty value); `event` sets the event name,
//!   `data` appends its value and a `\n` to the data buffer, `id` sets the
//!   last event id (ignored when it contains NUL), `retry` and unknown fields
//!   are ignored;
//! * an empty line dispatches the event: the data buffer without its last
//!   `\n`, under the event name (`message` when none was given). An event
//!   with no `data` line is not dispatched;
//! * a leading UTF-8 byte order mark is dropped; bytes that are not UTF-8 are
//!   replaced by U+FFFD;
//! * at the end of the stream, an event not yet ended by an empty line is
//!   discarded (it may be cut): [`SseDecoder::finish`] reports whether that
//!   happened.
//!
//! Decoding works on bytes and keeps every partial line across
//! [`SseDecoder::feed`] calls, so a chunk boundary anywhere (inside a
//! multibyte character, inside `data:`, between the `\r` and `\n` of one line
//! end, or between the two line ends that end an event) changes nothing.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The event name from the `event:` field; `message` when the event had none.
    pub event: String,
    /// The `data:` lines' values joined by `\n`.
    pub data: String,
    /// The last event id seen so far in the stream (`id:`), if any.
    pub id: Option<String>,
}

/// Errors of [`SseDecoder::feed`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// One line or one event's data grew past the decoder's limit (a stream
    /// that never ends its lines would otherwise grow without bound).
    #[error("an SSE event is larger than the limit of {limit} bytes")]
    TooLarge {
        /// The limit in bytes ([`SseDecoder::with_limit`]).
        limit: usize,
    },
}

/// The default limit on one line plus its event's data: 32 MiB.
pub const DEFAULT_EVENT_LIMIT: usize = 32 * 1024 * 1024;

/// Incremental SSE decoder: feed it byte chunks of any size, it returns the
/// events completed by each chunk.
#[derive(Debug, Clone)]
pub struct SseDecoder {
    /// The current line's bytes so far (without its line end).
    line: Vec<u8>,
    /// The previous chunk ended with `\r`: a `\n` starting the next chunk
    /// belongs to the same line end.
    after_cr: bool,
    /// Nothing has been fed yet (a leading BOM may still come).
    at_start: bool,
    /// Bytes of a possible leading BOM seen so far.
    bom: Vec<u8>,
    event: String,
    data: String,
    /// At least one `data` field was seen for the pending event.
    has_data: bool,
    /// A field line of the pending event was seen (for [`Self::finish`]).
    pending: bool,
    last_id: Option<String>,
    limit: usize,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

impl SseDecoder {
    /// A decoder with the default size limit ([`DEFAULT_EVENT_LIMIT`]).
    pub fn new() -> Self {
        Self::with_limit(DEFAULT_EVENT_LIMIT)
    }

    /// A decoder refusing lines or events larger than `limit` bytes.
    pub fn with_limit(limit: usize) -> Self {
        SseDecoder {
            line: Vec::new(),
            after_cr: false,
            at_start: true,
            bom: Vec::new(),
            event: String::new(),
            data: String::new(),
            has_data: false,
            pending: false,
            last_id: None,
            limit,
        }
    }

    /// Feeds the next chunk of the stream and returns the events it completed,
    /// in order.
    ///
    /// # Errors
    ///
    /// [`SseError::TooLarge`] when a line or an event's data passes the limit;
    /// the decoder should not be fed again after that.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        let mut events = Vec::new();
        let mut rest = chunk;
        if self.at_start {
            // Hold back bytes that may be a BOM until we know.
            while let Some((&b, tail)) = rest.split_first() {
                if self.bom.len() < BOM.len() && b == BOM[self.bom.len()] {
                    self.bom.push(b);
                    rest = tail;
                    if self.bom.len() == BOM.len() {
                        self.at_start = false;
                        self.bom.clear();
                        break;
                    }
                } else {
                    self.at_start = false;
                    let held = std::mem::take(&mut self.bom);
                    self.scan(&held, &mut events)?;
                    break;
                }
            }
            if self.at_start {
                return Ok(events);
            }
        }
        self.scan(rest, &mut events)?;
        Ok(events)
    }

    fn scan(&mut self, mut bytes: &[u8], events: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if self.after_cr {
            self.after_cr = false;
            if let Some(tail) = bytes.strip_prefix(b"\n") {
                bytes = tail;
            }
        }
        while let Some(pos) = bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.push_line_bytes(&bytes[..pos])?;
            let line = std::mem::take(&mut self.line);
            self.process_line(&line, events)?;
            if bytes[pos] == b'\r' {
                match bytes.get(pos + 1) {
                    Some(b'\n') => bytes = &bytes[pos + 2..],
                    Some(_) => bytes = &bytes[pos + 1..],
                    None => {
                        self.after_cr = true;
                        bytes = &[];
                    }
                }
            } else {
                bytes = &bytes[pos + 1..];
            }
        }
        self.push_line_bytes(bytes)
    }

    fn push_line_bytes(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.line.len() + bytes.len() + self.data.len() > self.limit {
            return Err(SseError::TooLarge { limit: self.limit });
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn process_line(&mut self, line: &[u8], events: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if line.is_empty() {
            self.dispatch(events);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        self.pending = true;
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match field {
            b"event" => self.event = String::from_utf8_lossy(value).into_owned(),
            b"data" => {
                if self.data.len() + value.len() + 1 > self.limit {
                    return Err(SseError::TooLarge { limit: self.limit });
                }
                self.data.push_str(&String::from_utf8_lossy(value));
                self.data.push('\n');
                self.has_data = true;
            }
            b"id" if !value.contains(&0) => self.last_id = Some(String::from_utf8_lossy(value).into_owned()),
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, events: &mut Vec<SseEvent>) {
        let event = std::mem::take(&mut self.event);
        let mut data = std::mem::take(&mut self.data);
        let has_data = std::mem::replace(&mut self.has_data, false);
        self.pending = false;
        if !has_data {
            return;
        }
        if data.ends_with('\n') {
            data.pop();
        }
        events.push(SseEvent {
            event: if event.is_empty() { "message".to_owned() } else { event },
            data,
            id: self.last_id.clone(),
        });
    }

    /// Ends the stream. Returns `true` when bytes of an unfinished event (a
    /// partial line, or field lines not yet ended by an empty line) were
    /// discarded, i.e. the stream was cut inside an event.
    pub fn finish(self) -> bool {
        !self.line.is_empty() || self.pending || !self.bom.is_empty()
    }
}

/// Decodes a whole stream at once (for tests and replay).
///
/// # Errors
///
/// As [`SseDecoder::feed`].
pub fn decode_all(bytes: &[u8]) -> Result<Vec<SseEvent>, SseError> {
    SseDecoder::new().feed(bytes)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    /// Every `.sse` file in `crates/providers/testdata/provider-recordings/`, with its name.
    pub(crate) fn recorded_streams() -> Vec<(String, Vec<u8>)> {
        let dir = crate::wire::tests::recording_path("");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "sse"))
            .collect();
        files.sort();
        assert!(files.len() >= 7, "expected the recorded .sse files in {}", dir.display());
        files
            .into_iter()
            .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
            .collect()
    }

    /// Feeds `bytes` cut at `cuts` (sorted positions) and returns all events.
    pub(crate) fn feed_cut(bytes: &[u8], cuts: &[usize]) -> Vec<SseEvent> {
        let mut d = SseDecoder::new();
        let mut events = Vec::new();
        let mut start = 0;
        for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
            events.extend(d.feed(&bytes[start..cut]).unwrap());
            start = cut;
        }
        assert!(!d.finish(), "a recorded stream ends with a complete event");
        events
    }

    /// Random sorted cut positions (1..=max_cuts of them) in `0..=len`.
    pub(crate) fn random_cuts(rng: &mut StdRng, len: usize, max_cuts: usize) -> Vec<usize> {
        let n = rng.random_range(1..=max_cuts);
        let mut cuts: Vec<usize> = (0..n).map(|_| rng.random_range(0..=len)).collect();
        cuts.sort_unstable();
        cuts
    }

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent { event: event.into(), data: data.into(), id: None }
    }

    #[test]
    fn basic_fields_comments_and_defaults() {
        let text = ": a comment\nevent: ping\ndata: {\"a\":1}\n\ndata: first\ndata:second\ndata\n\nevent: lonely\n\n";
        assert_eq!(
            decode_all(text.as_bytes()).unwrap(),
            vec![ev("ping", "{\"a\":1}"), ev("message", "first\nsecond\n")]
        );
    }

    #[test]
    fn line_ends_crlf_cr_and_lf_mixed() {
        let text = b"event: a\r\ndata: 1\r\n\r\nevent: b\rdata: 2\r\rdata: 3\n\n";
        assert_eq!(decode_all(text).unwrap(), vec![ev("a", "1"), ev("b", "2"), ev("message", "3")]);
    }

    #[test]
    fn only_one_leading_space_is_dropped_and_ids_are_kept() {
        let text = b"id: 7\ndata:  two spaces\nretry: 10\nunknown: x\n\nid: a\0b\ndata:x\n\n";
        let events = decode_all(text).unwrap();
        assert_eq!(events[0], SseEvent { event: "message".into(), data: " two spaces".into(), id: Some("7".into()) });
        // An id with NUL is ignored: the previous id stays.
        assert_eq!(events[1].id.as_deref(), Some("7"));
    }

    #[test]
    fn bom_is_dropped_even_when_split() {
        let text = "\u{feff}data: x\n\n".as_bytes();
        for cut in 0..=text.len() {
            assert_eq!(feed_cut(text, &[cut]), vec![ev("message", "x")], "cut at {cut}");
        }
        // A partial BOM that is not a BOM stays in the line (here: an unknown field).
        assert_eq!(decode_all(b"\xEFdata: x\n\n").unwrap(), vec![]);
    }

    #[test]
    fn unfinished_event_is_discarded_and_reported() {
        let mut d = SseDecoder::new();
        assert_eq!(d.feed(b"data: 1\n\ndata: 2\n").unwrap(), vec![ev("message", "1")]);
        assert!(d.finish());
        let mut d = SseDecoder::new();
        d.feed(b"data: 1\n\ndata: {\"cut").unwrap();
        assert!(d.finish());
        let mut d = SseDecoder::new();
        d.feed(b"data: 1\n\n").unwrap();
        assert!(!d.finish());
    }

    #[test]
    fn multibyte_characters_survive_any_cut() {
        let text = "event: é\ndata: 日本語 🎉 \"a\"\n\n".as_bytes();
        let want = vec![ev("é", "日本語 🎉 \"a\"")];
        for cut in 0..=text.len() {
            assert_eq!(feed_cut(text, &[cut]), want, "cut at {cut}");
        }
        for a in 0..=text.len() {
            for b in a..=text.len() {
                assert_eq!(feed_cut(text, &[a, b]), want, "cuts at {a}, {b}");
            }
        }
    }

    #[test]
    fn invalid_utf8_becomes_replacement_characters() {
        assert_eq!(decode_all(b"data: a\xFFb\n\n").unwrap(), vec![ev("message", "a\u{FFFD}b")]);
    }

    #[test]
    fn size_limit() {
        let mut d = SseDecoder::with_limit(16);
        assert_eq!(d.feed(b"data: 0123456789abcdef"), Err(SseError::TooLarge { limit: 16 }));
        let mut d = SseDecoder::with_limit(16);
        d.feed(b"data: 0123456789\n").unwrap();
        assert_eq!(d.feed(b"data: 0123456789\n"), Err(SseError::TooLarge { limit: 16 }));
    }

    #[test]
    fn every_recording_at_every_two_chunk_split() {
        for (name, bytes) in recorded_streams() {
            let whole = decode_all(&bytes).unwrap();
            assert!(whole.len() > 5, "{name}");
            for cut in 0..=bytes.len() {
                assert_eq!(feed_cut(&bytes, &[cut]), whole, "{name} cut at {cut}");
            }
        }
    }

    #[test]
    fn every_recording_with_crlf_line_ends_at_every_split() {
        for (name, bytes) in recorded_streams() {
            let whole = decode_all(&bytes).unwrap();
            let crlf = String::from_utf8(bytes).unwrap().replace('\n', "\r\n").into_bytes();
            for cut in 0..=crlf.len() {
                assert_eq!(feed_cut(&crlf, &[cut]), whole, "{name} (CRLF) cut at {cut}");
            }
        }
    }

    #[test]
    fn every_recording_at_random_multi_chunk_splits() {
        let mut rng = StdRng::seed_from_u64(0x55E_0001);
        for (name, bytes) in recorded_streams() {
            let whole = decode_all(&bytes).unwrap();
            for _ in 0..300 {
                let cuts = random_cuts(&mut rng, bytes.len(), 40);
                assert_eq!(feed_cut(&bytes, &cuts), whole, "{name} cut at {cuts:?}");
            }
            // One byte at a time.
            let every: Vec<usize> = (1..bytes.len()).collect();
            assert_eq!(feed_cut(&bytes, &every), whole, "{name} byte by byte");
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = StdRng::seed_from_u64(0x55E_0002);
        let alphabet: &[u8] = b"data:event: id\r\n\n\n:{}\"\\\xC3\xA9\xFF\xEF\xBB\xBF";
        for _ in 0..3000 {
            let len = rng.random_range(0..200);
            let bytes: Vec<u8> = (0..len)
                .map(
                    |_| if rng.random_bool(0.8) { alphabet[rng.random_range(0..alphabet.len())] } else { rng.random() },
                )
                .collect();
            let whole = decode_all(&bytes).unwrap();
            let cuts = random_cuts(&mut rng, bytes.len(), 8);
            let mut d = SseDecoder::new();
            let mut events = Vec::new();
            let mut start = 0;
            for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
                events.extend(d.feed(&bytes[start..cut]).unwrap());
                start = cut;
            }
            assert_eq!(events, whole, "{bytes:?} cut at {cuts:?}");
        }
    }
}
