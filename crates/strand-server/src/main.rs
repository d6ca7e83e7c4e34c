//! The `strand-server` binary: read the configuration (flags, `STRAND_*`
//! environment variables, `--config FILE`), bind, serve until SIGINT or
//! SIGTERM; or print the configuration (`--print-config`), or a token.

use std::process::ExitCode;

use strand_server::config::LoadError;
use strand_server::{Command, Config};
use tracing_subscriber::EnvFilter;

/// mimalloc instead of the system allocator: under load the server makes a
/// few short-lived allocations per request, which glibc's malloc served at
/// a quarter of the process's CPU time.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay`: its place in `mi_option_e`
/// (`mimalloc.h`), which `libmimalloc-sys` gives no name.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// mimalloc's own default for it (ms), by which the index is checked.
const MIMALLOC_DEFAULT_PURGE_DELAY: std::ffi::c_long = 1000;

/// Freed memory goes back to the system at once, not a second later
/// (mimalloc's default): with many streams flushing in turn, the pages
/// freed within that second were 35 MB of a durable node's resident
/// memory under the 256-byte resident load (`docs/performance.md`), at no
/// measurable cost to small appends (64 KiB appends lose about an
/// eighth of their rate). `MIMALLOC_PURGE_DELAY` in the environment wins.
fn return_freed_memory_at_once() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    #[allow(unsafe_code)]
    // SAFETY: both calls read or store one integer option of mimalloc,
    // which its documentation makes thread-safe; no pointer is passed.
    unsafe {
        if libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) == MIMALLOC_DEFAULT_PURGE_DELAY {
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0);
        }
    }
}

/// The log filter without `STRAND_LOG`: warnings, except openraft's
/// core's, which are stale Raft messages it ignores (several after every
/// membership change).
const DEFAULT_LOG: &str = "warn,openraft::core::raft_core=error";

fn main() -> ExitCode {
    return_freed_memory_at_once();
    let loaded = match strand_server::config::load(std::env::args_os()) {
        Ok(loaded) => loaded,
        Err(LoadError::Clap(e)) => e.exit(),
        Err(LoadError::File(e)) => {
            eprintln!("strand-server: {e}");
            return ExitCode::from(2);
        }
    };
    if loaded.cli.print_config {
        print!("{}", loaded.print_config());
        return ExitCode::SUCCESS;
    }
    let cli = loaded.cli;
    if let Some(Command::Token(args)) = cli.command {
        return token(&args);
    }
    let config = cli.config;
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("STRAND_LOG").unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG)),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match runtime(config.worker_threads) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("strand-server: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(config))
}

/// The runtime for `--worker-threads` (0: one worker per CPU this process
/// may use): a single worker runs on tokio's current-thread scheduler,
/// whose run queue keeps every woken task in order; more run on the
/// work-stealing scheduler.
fn runtime(worker_threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    let workers = match worker_threads {
        0 => std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
        n => n,
    };
    let mut builder = if workers == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(workers);
        b
    };
    builder.enable_all().build()
}

async fn run(mut config: Config) -> ExitCode {
    if let Err(e) = strand::validate_bucket_id(&config.default_bucket) {
        eprintln!(
            "strand-server: --default-bucket {:?}: {e}",
            config.default_bucket
        );
        return ExitCode::from(2);
    }
    let auth_on = match config.verifier() {
        Ok(v) => v.is_some(),
        Err(e) => {
            eprintln!("strand-server: {e}");
            return ExitCode::from(2);
        }
    };
    let tls_on = match strand_server::tls::acceptor(&config) {
        Ok(a) => a.is_some(),
        Err(e) => {
            eprintln!("strand-server: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = config.cluster_token() {
        eprintln!("strand-server: {e}");
        return ExitCode::from(2);
    }
    let cold = match config.cold_tier() {
        Ok(cold) => cold,
        Err(e) => {
            eprintln!("strand-server: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = config.check_limits() {
        eprintln!("strand-server: {e}");
        return ExitCode::from(2);
    }
    if let Err(e) = config.check_admin_listen(auth_on) {
        eprintln!("strand-server: {e}");
        return ExitCode::from(2);
    }
    if let Some(warning) = config.unauthenticated_warning(auth_on) {
        eprintln!("strand-server: {warning}");
    }
    let listener = match strand_server::listen(config.listen) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("strand-server: cannot listen on {}: {e}", config.listen);
            return ExitCode::FAILURE;
        }
    };
    let addr = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("strand-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    strand_server::advertise_by_default(&mut config, addr);
    let data_dir = config.effective_data_dir();
    if config.fsync == strand_server::config::FsyncMode::Never && data_dir.is_some() {
        eprintln!(
            "strand-server: warning: --fsync never: acknowledged writes can be lost if the machine crashes (benchmarks only)"
        );
    }
    // A durable node recovers its groups before it says it is ready.
    let node = match strand_server::start_engine_with(&config, cold.as_ref()).await {
        Ok(node) => node,
        Err(e) => {
            eprintln!("strand-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Every segment file the recovered state names must be there, whole.
    if let Some(tier) = &cold
        && let Err(e) = tier.check_segments(&node.engine).await
    {
        eprintln!("strand-server: {e}");
        return ExitCode::FAILURE;
    }
    let admin = match config.admin_listen.map(strand_server::listen).transpose() {
        Ok(admin) => admin,
        Err(e) => {
            eprintln!(
                "strand-server: cannot listen on --admin-listen {}: {e}",
                config
                    .admin_listen
                    .map(|a| a.to_string())
                    .unwrap_or_default()
            );
            return ExitCode::FAILURE;
        }
    };
    match &data_dir {
        Some(dir) => {
            let shown = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
            println!("strand-server data directory {}", shown.display());
        }
        None => eprintln!("strand-server: in memory (--memory): nothing survives a restart"),
    }
    let scheme = if tls_on { "https" } else { "http" };
    if config.http_engine == strand_server::config::HttpEngine::Hyper && !tls_on {
        eprintln!("strand-server: HTTP/1.1 served by hyper (--http-engine hyper)");
    }
    if let Some(admin_addr) = admin.as_ref().and_then(|l| l.local_addr().ok()) {
        // Before the ready line, so a script that waits for that line has
        // seen this one too.
        println!("strand-server admin listening on {scheme}://{admin_addr}");
    }
    println!("strand-server listening on {scheme}://{addr}");
    let listeners = strand_server::Listeners {
        client: listener,
        admin,
    };
    match strand_server::serve_with_cold(config, listeners, node, cold, shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strand-server: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `strand-server token`: prints an HS256 token.
fn token(args: &strand_server::config::TokenArgs) -> ExitCode {
    let secret = match strand_server::auth::read_secret(&args.secret_file) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("strand-server token: {e}");
            return ExitCode::FAILURE;
        }
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let claims = strand_server::auth::Claims {
        sub: args.subject.clone(),
        exp: now.saturating_add(args.ttl_seconds),
        grants: [(args.bucket.clone(), args.rights.clone())]
            .into_iter()
            .collect(),
    };
    match strand_server::auth::sign_hs256(&secret, &claims) {
        Ok(token) => {
            println!("{token}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("strand-server token: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}
