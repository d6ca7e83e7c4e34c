//! `strand tail --url URL STREAM [--from OFFSET] [--max-events N]`:
//! follow a stream over server-sent events
//! (`GET /v1/stream/{STREAM}?offset=…&live=sse`) and print each data
//! event — a JSON stream's messages pretty-printed, text as it is, binary
//! (`Stream-SSE-Data-Encoding: base64`) as hex lines like `xxd`'s — until
//! the stream is closed (a control event with `streamClosed: true`),
//! `--max-events` data events were printed, or Ctrl-C.
//!
//! The server ends an SSE response now and then (`--sse-max-duration-ms`);
//! the command then reconnects from the last control event's
//! `streamNextOffset` with its `streamCursor`, as the protocol's clients
//! do.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use base64::Engine as _;
use reqwest::Method;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde_json::Value;

use super::{Server, ServerArgs, describe, ensure_success, percent_encode, stream_path};

/// The longest line (`data:` or other field) a response may send: a data
/// event is one page of the stream, far below this.
const MAX_LINE_BYTES: u64 = 64 * 1024 * 1024;
/// Pauses before reconnecting after a response that brought nothing,
/// doubling up to the last.
const RECONNECT_PAUSES_MS: [u64; 5] = [0, 100, 250, 500, 1_000];

/// Arguments of `strand tail`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub(crate) server: ServerArgs,
    /// The stream's name on the protocol's mount (`/v1/stream/NAME`); `/`
    /// separates segments, anything else is sent percent-encoded.
    #[arg(value_name = "STREAM")]
    pub(crate) stream: String,
    /// Where to start: `-1` (the start of the stream), `now` (its tail:
    /// only what is appended from now on), or an offset the server
    /// handed out (`Stream-Next-Offset`).
    #[arg(
        long,
        value_name = "OFFSET",
        default_value = "-1",
        allow_hyphen_values = true
    )]
    pub(crate) from: String,
    /// Stop after printing this many data events.
    #[arg(long, value_name = "N")]
    pub(crate) max_events: Option<u64>,
}

/// How a stream's data events are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rendering {
    /// A JSON stream: each event is an array of messages, each printed
    /// pretty.
    Json,
    /// Text, as it is.
    Text,
    /// base64 on the wire, printed as hex lines.
    Hex,
}

/// What reading one response ended with.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// The stream was closed, or enough events were printed: stop.
    Done,
    /// The response ended (or broke off): reconnect.
    Reconnect,
}

/// The follower's state across responses.
struct Tail<'a> {
    out: &'a mut dyn Write,
    /// Where the next connection starts.
    offset: String,
    /// The last `streamCursor`, sent back on reconnecting.
    cursor: Option<String>,
    /// Data events printed.
    events: u64,
    max_events: Option<u64>,
    /// Bytes shown as hex so far (the left column of the hex lines).
    hex_offset: u64,
    /// Whether the current response brought any event.
    progressed: bool,
}

/// Runs the command.
pub(crate) fn run(args: &Args, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let server = Server::live(&args.server)?;
    let url = server.url(&stream_path(&args.stream)?);
    let mut tail = Tail {
        out,
        offset: args.from.clone(),
        cursor: None,
        events: 0,
        max_events: args.max_events,
        hex_offset: 0,
        progressed: false,
    };
    if tail.enough() {
        return Ok(ExitCode::SUCCESS);
    }
    let mut rendering = None;
    let mut idle = 0usize;
    loop {
        let mut query = format!("?offset={}&live=sse", percent_encode(&tail.offset));
        if let Some(cursor) = &tail.cursor {
            query.push_str("&cursor=");
            query.push_str(&percent_encode(cursor));
        }
        let request_url = format!("{url}{query}");
        let what = describe(&Method::GET, &request_url);
        let response = server.send_ok(
            server
                .request(Method::GET, &request_url)
                .header(ACCEPT, "text/event-stream"),
            &what,
        )?;
        let media = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        if !media.starts_with("text/event-stream") {
            bail!("{what}: expected an event stream, got {media:?}");
        }
        let base64 = response
            .headers()
            .get("Stream-SSE-Data-Encoding")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("base64"));
        let rendering = *rendering.get_or_insert_with(|| {
            if base64 {
                Rendering::Hex
            } else if is_json(&stream_content_type(&server, &url)) {
                Rendering::Json
            } else {
                Rendering::Text
            }
        });
        tail.progressed = false;
        if tail.follow(response, rendering, &what)? == End::Done {
            return Ok(ExitCode::SUCCESS);
        }
        idle = if tail.progressed { 0 } else { idle + 1 };
        let pause = RECONNECT_PAUSES_MS[idle.min(RECONNECT_PAUSES_MS.len() - 1)];
        std::thread::sleep(Duration::from_millis(pause));
    }
}

impl Tail<'_> {
    fn enough(&self) -> bool {
        self.max_events.is_some_and(|max| self.events >= max)
    }

    /// Reads one response's events until it ends.
    fn follow(
        &mut self,
        response: reqwest::blocking::Response,
        rendering: Rendering,
        what: &str,
    ) -> anyhow::Result<End> {
        let mut reader = BufReader::new(response);
        let mut line = Vec::new();
        let mut kind = String::new();
        let mut data: Vec<u8> = Vec::new();
        let mut has_data = false;
        loop {
            line.clear();
            let read = (&mut reader)
                .take(MAX_LINE_BYTES)
                .read_until(b'\n', &mut line);
            match read {
                // The response ended or broke off (a reset, the server
                // stopping): the next connection tells which.
                Ok(0) | Err(_) => return Ok(End::Reconnect),
                Ok(_) => {}
            }
            if line.last() != Some(&b'\n') && line.len() as u64 >= MAX_LINE_BYTES {
                bail!("{what}: an event line longer than {MAX_LINE_BYTES} bytes");
            }
            while matches!(line.last(), Some(b'\n' | b'\r')) {
                line.pop();
            }
            if line.is_empty() {
                // A blank line ends the event.
                let event = std::mem::take(&mut kind);
                let payload = std::mem::take(&mut data);
                let had_data = std::mem::replace(&mut has_data, false);
                if event.is_empty() && !had_data {
                    continue;
                }
                self.progressed = true;
                let done = match event.as_str() {
                    "control" => self.control(&payload, what)?,
                    "data" | "" => {
                        self.data(&payload, rendering, what)?;
                        self.enough()
                    }
                    _ => false,
                };
                if done {
                    return Ok(End::Done);
                }
                continue;
            }
            if line.first() == Some(&b':') {
                continue; // a comment
            }
            let (field, value) = match line.iter().position(|&b| b == b':') {
                Some(i) => {
                    let value = &line[i + 1..];
                    (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
                }
                None => (&line[..], &b""[..]),
            };
            match field {
                b"event" => kind = String::from_utf8_lossy(value).into_owned(),
                b"data" => {
                    if has_data {
                        data.push(b'\n');
                    }
                    data.extend_from_slice(value);
                    has_data = true;
                }
                _ => {}
            }
        }
    }

    /// A control event: remembers where to reconnect; true when the
    /// stream is closed.
    fn control(&mut self, payload: &[u8], what: &str) -> anyhow::Result<bool> {
        let control: Value = serde_json::from_slice(payload)
            .with_context(|| format!("{what}: a control event that is not JSON"))?;
        if let Some(next) = control.get("streamNextOffset").and_then(Value::as_str) {
            next.clone_into(&mut self.offset);
        }
        if let Some(cursor) = control.get("streamCursor").and_then(Value::as_str) {
            self.cursor = Some(cursor.to_owned());
        }
        Ok(control.get("streamClosed").and_then(Value::as_bool) == Some(true))
    }

    /// A data event, printed.
    fn data(&mut self, payload: &[u8], rendering: Rendering, what: &str) -> anyhow::Result<()> {
        match rendering {
            Rendering::Text => {
                self.out.write_all(payload)?;
                if payload.last() != Some(&b'\n') {
                    self.out.write_all(b"\n")?;
                }
            }
            Rendering::Json => match serde_json::from_slice::<Value>(payload) {
                Ok(Value::Array(messages)) => {
                    for message in &messages {
                        serde_json::to_writer_pretty(&mut *self.out, message)?;
                        self.out.write_all(b"\n")?;
                    }
                }
                Ok(other) => {
                    serde_json::to_writer_pretty(&mut *self.out, &other)?;
                    self.out.write_all(b"\n")?;
                }
                // Not JSON after all: as it came.
                Err(_) => {
                    self.out.write_all(payload)?;
                    self.out.write_all(b"\n")?;
                }
            },
            Rendering::Hex => {
                let text: Vec<u8> = payload
                    .iter()
                    .copied()
                    .filter(|b| !b.is_ascii_whitespace())
                    .collect();
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(&text)
                    .with_context(|| format!("{what}: a data event that is not base64"))?;
                self.out
                    .write_all(hex_lines(self.hex_offset, &bytes).as_bytes())?;
                self.hex_offset += bytes.len() as u64;
            }
        }
        self.out.flush()?;
        self.events += 1;
        Ok(())
    }
}

/// Whether a content type is JSON (`application/json`, parameters and
/// case aside), as the server decides its SSE encoding.
fn is_json(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .eq_ignore_ascii_case("application/json")
}

/// The stream's content type, from `HEAD` (empty when it cannot be had).
fn stream_content_type(server: &Server, url: &str) -> String {
    server
        .request(Method::HEAD, url)
        .send()
        .ok()
        .and_then(|r| ensure_success(r, "HEAD").ok())
        .and_then(|r| {
            r.headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        })
        .unwrap_or_default()
}

/// `bytes` as `xxd` prints them: 16 a line, the offset (counted from
/// `start`) in 8 hex digits, the bytes in pairs, then the printable ASCII
/// characters (`.` for the others).
fn hex_lines(start: u64, bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut text = String::new();
    for (i, chunk) in bytes.chunks(16).enumerate() {
        let _ = write!(text, "{:08x}:", start + 16 * i as u64);
        let mut hex = String::new();
        for (j, byte) in chunk.iter().enumerate() {
            if j % 2 == 0 {
                hex.push(' ');
            }
            let _ = write!(hex, "{byte:02x}");
        }
        // 16 bytes take 8 groups of " xxxx": 40 characters.
        let _ = write!(text, "{hex:<40}  ");
        for &byte in chunk {
            text.push(if byte.is_ascii_graphic() || byte == b' ' {
                char::from(byte)
            } else {
                '.'
            });
        }
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_lines_match_xxd() {
        // printf 'hello world\n\x00\x01\xff' | xxd, and a second full line.
        assert_eq!(
            hex_lines(0, b"hello world\n\x00\x01\xff"),
            "00000000: 6865 6c6c 6f20 776f 726c 640a 0001 ff    hello world....\n"
        );
        let bytes: Vec<u8> = (0u8..20).collect();
        assert_eq!(
            hex_lines(32, &bytes),
            "00000020: 0001 0203 0405 0607 0809 0a0b 0c0d 0e0f  ................\n\
             00000030: 1011 1213                                ....\n"
        );
    }

    #[test]
    fn json_types() {
        assert!(is_json("application/json"));
        assert!(is_json("Application/JSON; charset=utf-8"));
        assert!(!is_json("application/jsonl"));
        assert!(!is_json("text/plain"));
    }
}
