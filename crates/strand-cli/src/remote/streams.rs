//! `strand streams list --url URL [--bucket B] [--prefix P]`: a bucket's
//! streams by name prefix (`GET /__strand/streams/{bucket}`), a page at a
//! time: name, retained bytes, next offset, content type and whether it
//! is closed. `--all` follows every page; otherwise the command prints
//! the `--after` that continues.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use reqwest::Method;
use serde_json::Value;

use super::status::columns;
use super::{Server, ServerArgs, describe, percent_encode};

/// The most pages `--all` follows (a page holds up to 1,000 streams).
const MAX_PAGES: usize = 100_000;

/// Arguments of `strand streams list`.
#[derive(Debug, clap::Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    pub(crate) server: ServerArgs,
    /// The bucket (the protocol's mount is the server's default bucket,
    /// `default` unless `--default-bucket` changed it).
    #[arg(long, value_name = "B", default_value = "default")]
    pub(crate) bucket: String,
    /// Only names starting with this (on the mount a stream's name is its
    /// path after `/v1/stream/`).
    #[arg(long, value_name = "P", default_value = "")]
    pub(crate) prefix: String,
    /// Streams per page (1 to 1,000).
    #[arg(long, value_name = "N", default_value_t = 100,
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub(crate) limit: u16,
    /// Continue after this cursor (the `next` a page gave).
    #[arg(long, value_name = "CURSOR")]
    pub(crate) after: Option<String>,
    /// Follow every page to the end.
    #[arg(long)]
    pub(crate) all: bool,
    /// Print each page's JSON as the server sends it, one per line.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Runs the command.
pub(crate) fn run(args: &ListArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let server = Server::new(&args.server)?;
    let mut after = args.after.clone();
    let mut rows = vec![
        ["name", "bytes", "next offset", "content type", "closed"]
            .map(str::to_owned)
            .to_vec(),
    ];
    let mut listed = 0usize;
    for _ in 0..MAX_PAGES {
        let mut url = server.url(&format!(
            "/__strand/streams/{}?limit={}&prefix={}",
            percent_encode(&args.bucket),
            args.limit,
            percent_encode(&args.prefix)
        ));
        if let Some(after) = &after {
            url.push_str("&after=");
            url.push_str(&percent_encode(after));
        }
        let what = describe(&Method::GET, &url);
        let text = server
            .send_ok(server.request(Method::GET, &url), &what)?
            .text()
            .with_context(|| format!("{what}: reading the answer"))?;
        let page: Value = serde_json::from_str(&text)
            .with_context(|| format!("{what}: the answer is not JSON"))?;
        if args.json {
            writeln!(out, "{}", text.trim_end())?;
        }
        for stream in page["streams"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            listed += 1;
            let field = |key: &str| match &stream[key] {
                Value::String(s) => s.clone(),
                Value::Null => "-".to_owned(),
                other => other.to_string(),
            };
            rows.push(vec![
                field("name"),
                field("bytes"),
                field("next_offset"),
                field("content_type"),
                if stream["closed"] == true {
                    "yes"
                } else {
                    "no"
                }
                .to_owned(),
            ]);
        }
        after = page["next"].as_str().map(str::to_owned);
        if !args.all || after.is_none() {
            break;
        }
    }
    if !args.json {
        if listed == 0 {
            writeln!(out, "no streams")?;
        } else {
            out.write_all(columns(&rows, "").as_bytes())?;
        }
        if let Some(after) = &after {
            writeln!(out, "more: --after {}", shell_word(after))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `text` quoted for a POSIX shell when it needs to be.
fn shell_word(text: &str) -> String {
    if !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./~%:".contains(&b))
    {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}
