//! A run's network as this machine holds it: the frozen policy resolved against the run's
//! adapters and their base-URL overrides (`harn_core::work::network`), then a network
//! namespace of its own for every child (`confine::Net`), whose only way out is the proxy
//! started here (`work::proxy`). A machine that cannot make the namespace runs open and says
//! so, but never runs a `"none"` policy open.

use super::confine::Net;
use super::proxy::Proxy;
use harn_core::work::containment::{NetworkHeld, Plan};
use harn_core::work::network::{self, Endpoint, NetworkPolicy};
use harn_core::work::run::RunManifest;
use std::ffi::CString;
use std::path::Path;

/// The port in a run's namespace where its proxy's clients connect.
const PROXY_PORT: u16 = 3128;

/// A run's network as held: the record, the namespace its children get, and their proxy.
pub type Held = (Option<NetworkHeld>, Option<Net>, Option<Proxy>);

/// What the run of `m`, confined as `plan`, may reach, and how it is held: the record, the
/// namespace its children get, and the proxy that is their way out (kept while it runs).
pub fn hold(m: &RunManifest, plan: &Plan, temp: &Path) -> Result<Held, String> {
    // A run started before network policies reaches what it reached then.
    let Some(policy) = &m.network else { return Ok((None, None, None)) };
    let allowed = network::resolve(policy, &adapter_hosts(m), &overrides());
    if allowed.open {
        return Ok((Some(NetworkHeld { allowed, held: true, why: None }), None, None));
    }
    let why = match (plan.namespace.is_some(), plan.record.confined) {
        (true, true) => None,
        (_, false) => {
            Some(plan.record.why.clone().unwrap_or_else(|| "the run is not confined".into()))
        }
        (false, true) => Some("this machine gives runs no namespace of their own".into()),
    };
    if let Some(why) = why {
        if *policy == NetworkPolicy::None {
            return Err(format!(
                "its network policy is \"none\", which this machine cannot hold ({why}); \
                 nothing was run"
            ));
        }
        return Ok((Some(NetworkHeld { allowed, held: false, why: Some(why) }), None, None));
    }
    // The proxy runs whatever the list holds: what it refuses is recorded, so a run that
    // tried to reach what its policy does not name says so.
    let proxy = Some(Proxy::start(temp, allowed.clone()).map_err(|e| format!("its proxy: {e}"))?);
    let direct: Vec<(u16, CString)> = allowed
        .endpoints
        .iter()
        .filter(|e| is_loopback(&e.host))
        .take(super::confine::DIRECT_MAX)
        .filter_map(|e| Some((e.port, CString::new(e.host.clone()).ok()?)))
        .collect();
    let mut port = PROXY_PORT;
    while direct.iter().any(|(p, _)| *p == port) {
        port += 1;
    }
    let path = match &proxy {
        Some(p) => Some(
            CString::new(p.path.display().to_string()).map_err(|e| format!("its proxy: {e}"))?,
        ),
        None => None,
    };
    let net = Net { proxy: path, port, direct };
    Ok((Some(NetworkHeld { allowed, held: true, why: None }), Some(net), proxy))
}

fn is_loopback(host: &str) -> bool {
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|a| a.is_loopback())
}

/// The hosts the run's adapters need: each one's preset's.
fn adapter_hosts(m: &RunManifest) -> Vec<Endpoint> {
    let specs = m.adapter.iter().map(|a| &a.spec).chain(m.adapters.values());
    let mut out = Vec::new();
    for spec in specs {
        let program = spec.command.first().map(String::as_str).unwrap_or_default();
        out.extend(
            harn_core::work::adapter::preset_hosts(spec.kind, program)
                .iter()
                .filter_map(|h| Endpoint::parse(h).ok()),
        );
    }
    out
}

/// The endpoints the agents are pointed at instead of their vendors': a `…_BASE_URL` in the
/// environment, Claude Code's settings (`env.ANTHROPIC_BASE_URL`) and Codex's configuration
/// (`openai_base_url`).
fn overrides() -> Vec<Endpoint> {
    let mut urls: Vec<String> =
        std::env::vars().filter(|(k, _)| k.ends_with("_BASE_URL")).map(|(_, v)| v).collect();
    if let Ok(home) = std::env::var("HOME") {
        let claude = std::fs::read(Path::new(&home).join(".claude/settings.json")).ok();
        let settings = claude.and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
        if let Some(env) = settings.as_ref().and_then(|s| s.get("env")).and_then(|e| e.as_object())
        {
            urls.extend(
                env.iter()
                    .filter(|(k, _)| k.ends_with("_BASE_URL"))
                    .filter_map(|(_, v)| v.as_str().map(str::to_owned)),
            );
        }
        let codex_home = std::env::var("CODEX_HOME").unwrap_or_else(|_| format!("{home}/.codex"));
        let config = std::fs::read_to_string(Path::new(&codex_home).join("config.toml")).ok();
        let table = config.and_then(|t| toml::from_str::<toml::Table>(&t).ok());
        if let Some(url) =
            table.as_ref().and_then(|t| t.get("openai_base_url")).and_then(|v| v.as_str())
        {
            urls.push(url.to_owned());
        }
    }
    urls.iter().filter_map(|u| Endpoint::of_url(u)).collect()
}
