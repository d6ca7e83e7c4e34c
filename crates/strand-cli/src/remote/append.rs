//! `strand append --url URL STREAM [DATA | --file F]`: append to a stream
//! (`POST /v1/stream/{STREAM}`) and print the `Stream-Next-Offset` the
//! server answers; `--create` creates the stream first (`PUT`).

use std::io::{self, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use reqwest::Method;
use reqwest::header::CONTENT_TYPE;

use super::{Server, ServerArgs, describe, stream_path};

/// The content type of a stream created without `--content-type` (the
/// protocol's default).
const DEFAULT_CONTENT_TYPE: &str = "application/octet-stream";

/// Arguments of `strand append`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub(crate) server: ServerArgs,
    /// The stream's name on the protocol's mount (`/v1/stream/NAME`); `/`
    /// separates segments, anything else is sent percent-encoded.
    #[arg(value_name = "STREAM")]
    pub(crate) stream: String,
    /// The bytes to append (else `--file`, else standard input).
    #[arg(value_name = "DATA", conflicts_with = "file")]
    pub(crate) data: Option<String>,
    /// Append this file's bytes (`-`: standard input).
    #[arg(long, value_name = "FILE")]
    pub(crate) file: Option<PathBuf>,
    /// The body's content type. Without it: the stream's own (asked with
    /// `HEAD`), or `application/octet-stream` for a stream `--create`
    /// makes.
    #[arg(long, value_name = "CT")]
    pub(crate) content_type: Option<String>,
    /// Create the stream first (`PUT`; an existing stream with the same
    /// content type is fine).
    #[arg(long)]
    pub(crate) create: bool,
    /// Close the stream with this append (`Stream-Closed: true`); the
    /// body may then be empty.
    #[arg(long)]
    pub(crate) close: bool,
}

/// Runs the command: the new tail offset on `out`.
pub(crate) fn run(args: &Args, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let server = Server::new(&args.server)?;
    let url = server.url(&stream_path(&args.stream)?);
    let body = read_body(args)?;

    let content_type = match &args.content_type {
        Some(ct) => ct.clone(),
        None if args.create => DEFAULT_CONTENT_TYPE.to_owned(),
        None => stream_content_type(&server, &url),
    };

    if args.create {
        let what = describe(&Method::PUT, &url);
        let response = server.send_ok(
            server
                .request(Method::PUT, &url)
                .header(CONTENT_TYPE, &content_type),
            &what,
        )?;
        if body.is_empty() && !args.close {
            // Nothing to append: the stream's tail is the answer.
            writeln!(out, "{}", next_offset(&response, &what)?)?;
            return Ok(ExitCode::SUCCESS);
        }
    } else if body.is_empty() && !args.close {
        bail!("nothing to append: give DATA, --file or standard input (or --close)");
    }

    let what = describe(&Method::POST, &url);
    let mut request = server
        .request(Method::POST, &url)
        .header(CONTENT_TYPE, &content_type);
    if args.close {
        request = request.header("Stream-Closed", "true");
    }
    let response = server.send_ok(request.body(body), &what)?;
    writeln!(out, "{}", next_offset(&response, &what)?)?;
    Ok(ExitCode::SUCCESS)
}

/// The body: DATA, the file, or standard input (unless it is a terminal,
/// which would wait for typing: then nothing).
fn read_body(args: &Args) -> anyhow::Result<Vec<u8>> {
    if let Some(data) = &args.data {
        return Ok(data.clone().into_bytes());
    }
    let read_stdin = || -> anyhow::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        io::stdin()
            .lock()
            .read_to_end(&mut bytes)
            .context("reading standard input")?;
        Ok(bytes)
    };
    match &args.file {
        Some(path) if path.as_os_str() == "-" => read_stdin(),
        Some(path) => std::fs::read(path).with_context(|| format!("reading {}", path.display())),
        None if io::stdin().is_terminal() => Ok(Vec::new()),
        None => read_stdin(),
    }
}

/// The stream's content type, from `HEAD`; the protocol's default when
/// it cannot be had (the `POST` then reports what is wrong: a missing
/// stream, a refused token).
fn stream_content_type(server: &Server, url: &str) -> String {
    server
        .request(Method::HEAD, url)
        .send()
        .ok()
        .filter(|r| r.status().is_success())
        .and_then(|r| {
            r.headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| DEFAULT_CONTENT_TYPE.to_owned())
}

/// The answer's `Stream-Next-Offset`.
fn next_offset(response: &reqwest::blocking::Response, what: &str) -> anyhow::Result<String> {
    response
        .headers()
        .get("Stream-Next-Offset")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("{what}: the answer has no Stream-Next-Offset"))
}
