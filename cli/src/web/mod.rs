//! `harn web`: a local web application over a root's records, for a person at this machine or
//! through an SSH tunnel. It reads as `harn dash` reads (`dash::readers`), and its actions
//! are the CLI's own verbs run with the web actor (`act`). Every request passes the door
//! first (`harn_core::web`, fed by `peer` and `serve`): docs/decisions/0016 says why each rule
//! is there.

mod act;
mod diff;
mod pages;
mod peer;
mod reply;
mod serve;
mod shown;

use crate::exit::{fail, Exit, EXIT_FAILED, EXIT_USAGE};
use clap::Args;
use harn_core::web::Door;
use std::io::Read as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// `harn web`
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  harn web\n  harn web --listen 127.0.0.1:8800\n  \
    ssh -L 8800:127.0.0.1:8800 build-box harn web --root ~/src/app --listen 127.0.0.1:8800")]
pub struct WebArgs {
    /// The coordination root (default: found from the current directory, as git finds its
    /// repository).
    #[arg(long)]
    root: Option<PathBuf>,
    /// Where to listen: a loopback address unless `--not-loopback` says otherwise (port 0
    /// picks a free port).
    #[arg(long, default_value = "127.0.0.1:0", value_name = "ADDR:PORT")]
    listen: SocketAddr,
    /// Allow listening on an address other machines reach. The login key is then all that
    /// stands between them and the person's authority; prefer an SSH tunnel.
    #[arg(long)]
    not_loopback: bool,
    /// Also answer to this name (`build-box:8800`), as a browser through a tunnel or a proxy
    /// names the server in its `Host` header (repeatable).
    #[arg(long = "also-named", value_name = "HOST:PORT")]
    also_named: Vec<String>,
    /// Worker threads answering requests.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u8).range(1..=32))]
    threads: u8,
}

/// What every worker shares: the root, the door and the kept reads.
pub struct Web {
    /// The coordination root.
    root: PathBuf,
    /// The address the server listens on.
    listen: SocketAddr,
    /// The door: its login key until used, and the sessions.
    door: Mutex<Door>,
    /// Messages for each session's next page (what an action came to).
    said: Mutex<Vec<Vec<String>>>,
    /// The reads a long-lived reader keeps between requests (as the dashboard's).
    kept: Mutex<crate::dash::readers::Kept>,
    /// Who acts, as the records show it: `web:<user>`.
    actor: String,
}

/// Runs the server until it is stopped (SIGINT, SIGTERM); returns the exit code.
pub fn run(args: WebArgs) -> Exit {
    let root = match crate::os::root::discover(args.root.as_deref()) {
        Ok(r) => r,
        Err(e) => {
            let shown = args.root.unwrap_or_else(|| PathBuf::from(".")).display().to_string();
            return fail(EXIT_USAGE, format!("{shown}: {e}"));
        }
    };
    if let Err(e) = crate::os::root::require_ledger(&root, args.root.is_some()) {
        return fail(EXIT_FAILED, e);
    }
    if !args.listen.ip().is_loopback() && !args.not_loopback {
        return fail(
            EXIT_USAGE,
            format!(
                "--listen {}: not a loopback address; other machines could reach it. Use an SSH \
                 tunnel, or add --not-loopback if you mean it",
                args.listen
            ),
        );
    }
    let server = match tiny_http::Server::http(args.listen) {
        Ok(s) => Arc::new(s),
        Err(e) => return fail(EXIT_FAILED, format!("--listen {}: {e}", args.listen)),
    };
    let Some(listen) = server.server_addr().to_ip() else {
        return fail(EXIT_FAILED, "the server has no IP address");
    };
    // The session's secrets live in this process's memory: no other process of the user may
    // read it (`/proc/PID/mem`, ptrace) or its descriptors. The verbs it starts are dumpable
    // again once they exec.
    if let Err(e) =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        return fail(EXIT_FAILED, format!("prctl(PR_SET_DUMPABLE): {e}"));
    }
    let key = match secret() {
        Ok(k) => k,
        Err(e) => return fail(EXIT_FAILED, format!("/dev/urandom: {e}")),
    };
    let mut names = args.also_named.clone();
    if listen.ip().is_loopback() {
        names.push(format!("localhost:{}", listen.port()));
    }
    let door = Door::new(&listen.to_string(), &names, key.clone());
    let web = Arc::new(Web {
        root: root.clone(),
        listen,
        door: Mutex::new(door),
        said: Mutex::new(Vec::new()),
        kept: Mutex::new(Default::default()),
        actor: format!("web:{}", crate::verb::actor(None)),
    });
    errln!("harn: serving {} for {} (Ctrl-C stops it); log in once at:", listen, root.display());
    // On a line of its own, first on it, so a script or a terminal takes it as it is.
    outln!("http://{listen}/login?key={key}");
    errln!("harn: the address works once: the secret lives in this process's memory only");
    let warming = web.clone();
    std::thread::spawn(move || pages::warm(&warming));
    let mut workers = Vec::new();
    for _ in 0..args.threads {
        let (server, web) = (server.clone(), web.clone());
        workers.push(std::thread::spawn(move || {
            while let Ok(request) = server.recv() {
                // A request whose answer panics loses its answer, never the worker.
                let answered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    serve::answer(&web, request)
                }));
                if answered.is_err() {
                    errln!("harn: a request's answer failed (said above); the server goes on");
                }
            }
        }));
    }
    let stop = match stop_signals() {
        Ok(s) => s,
        Err(e) => return fail(EXIT_FAILED, format!("signal handling: {e}")),
    };
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    server.unblock();
    errln!("harn: web server stopped");
    Ok(0)
}

/// A flag set on SIGINT or SIGTERM.
fn stop_signals() -> std::io::Result<Arc<std::sync::atomic::AtomicBool>> {
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, flag.clone())?;
    }
    Ok(flag)
}

/// 128 bits from the kernel's generator, as 32 hexadecimal digits.
pub(crate) fn secret() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
