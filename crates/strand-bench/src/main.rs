//! strand-bench: a load tool for the Durable Streams HTTP protocol.
//!
//! It drives any server that mounts the protocol at `/v1/stream/` (strand,
//! the node reference server, the Rust community server, Electric's Rust
//! server) through five scenarios — writes, SSE fan-out, catch-up reads,
//! idle memory, resident memory while appending — each bounded in time and
//! in count, and only against loopback addresses. With `--server-pid` it
//! also reads the server process's CPU time and resident memory (`VmRSS`,
//! and `RssAnon` for `resident`) from `/proc`. Every run ends with one `RESULT {json}` line that
//! `cargo xtask loadtest` collects.

mod client;
mod scenarios;
mod stats;

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A load tool for the Durable Streams HTTP protocol (loopback only).
#[derive(Debug, Parser)]
#[command(name = "strand-bench", version, about)]
struct Cli {
    /// The server's base URL (`http://127.0.0.1:PORT`); loopback only.
    /// Repeated for the nodes of a cluster: `writes` spreads its writers
    /// over them round-robin (every other scenario uses the first).
    #[arg(long, required = true)]
    url: Vec<String>,
    /// The server's process id, to report its CPU time and memory;
    /// repeated for a cluster's processes (their CPU times are added).
    #[arg(long)]
    server_pid: Vec<u32>,
    /// Another node of the cluster that takes no load but whose log
    /// counters (`GET /__strand/health`) `writes` adds to the loaded
    /// nodes' (repeated; loopback only).
    #[arg(long)]
    stats_url: Vec<String>,
    /// The scenario.
    #[command(subcommand)]
    scenario: Scenario,
}

/// The scenarios.
#[derive(Debug, Subcommand)]
pub(crate) enum Scenario {
    /// Concurrent writers, each appending to its own stream.
    Writes(scenarios::WritesArgs),
    /// One stream, a steady writer, many SSE subscribers.
    Fanout(scenarios::FanoutArgs),
    /// Many clients each reading their own stream from the start.
    Catchup(scenarios::CatchupArgs),
    /// Resident memory per empty stream.
    IdleMemory(scenarios::IdleMemoryArgs),
    /// The server's anonymous resident memory (RssAnon) while appending a
    /// fixed number of bytes round-robin over many streams.
    Resident(scenarios::ResidentArgs),
}

/// Resolves the URL to a loopback socket address, refusing anything else.
fn loopback_addr(url: &str) -> Result<SocketAddr, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url}: only http:// URLs are supported"))?;
    let authority = rest.split('/').next().unwrap_or(rest);
    let addrs: Vec<SocketAddr> = authority
        .to_socket_addrs()
        .map_err(|e| format!("{url}: {e}"))?
        .collect();
    let addr = addrs
        .into_iter()
        .next()
        .ok_or_else(|| format!("{url}: no address"))?;
    let loopback = match addr.ip() {
        IpAddr::V4(ip) => ip.is_loopback(),
        IpAddr::V6(ip) => ip.is_loopback(),
    };
    if loopback {
        Ok(addr)
    } else {
        Err(format!(
            "{url}: strand-bench only targets loopback addresses"
        ))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let parse = |urls: &[String]| {
        urls.iter()
            .map(|u| loopback_addr(u))
            .collect::<Result<Vec<_>, _>>()
    };
    let addrs = match parse(&cli.url).and_then(|a| Ok((a, parse(&cli.stats_url)?))) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("strand-bench: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("strand-bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(scenarios::run(
        &addrs.0,
        &addrs.1,
        &cli.server_pid,
        cli.scenario,
    )) {
        Ok(result) => {
            println!("RESULT {result}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("strand-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_is_accepted() {
        assert!(loopback_addr("http://127.0.0.1:4437").is_ok());
        assert!(loopback_addr("http://[::1]:4437/v1").is_ok());
        assert!(loopback_addr("http://10.0.0.1:80").is_err());
        assert!(loopback_addr("https://127.0.0.1:1").is_err());
    }
}
