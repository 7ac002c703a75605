//! `.harnery/config.json`: harnesses declared for this root, read with errors that name the
//! file, the line and the field. JSON with comments and trailing commas, as policy files are
//! (`harn init` writes a commented starter).

use harn_core::work::agent::{resolve, AdapterSpec};
use harn_core::work::cluster::ClusterSpec;
use harn_core::work::run::FrozenAdapter;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The file's shape; unknown keys are refused so a typo is not silently ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    schema_version: Option<u32>,
    #[serde(default)]
    harnesses: BTreeMap<String, AdapterSpec>,
    #[serde(default)]
    containment: ContainmentConfig,
    /// The resource limits of every run (`tasks`, `memory`, `cpu_weight`, `tmpfs`); what it
    /// does not name keeps its default.
    #[serde(default)]
    limits: harn_core::limits::ResourceLimits,
    /// Clusters whose nodes run attempts' segments, by name.
    #[serde(default)]
    clusters: BTreeMap<String, ClusterSpec>,
    /// Where notices go (`harn_core::notify::parse_channels` reads it).
    #[serde(default)]
    notify: Option<serde_json::Value>,
    /// What runs may reach over the network (`harn_core::work::network` reads it).
    #[serde(default)]
    network: Option<serde_json::Value>,
}

/// `containment`: what every confined run of this root may write besides its workspace, its
/// temporary directory and its harnesses' state (`~/` is the home directory, a relative path
/// is taken from the root).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ContainmentConfig {
    #[serde(default)]
    writable: Vec<String>,
    /// Credentials from the environment every run's children may have, by name.
    #[serde(default)]
    env: Vec<String>,
}

fn read_config(root: &Path) -> Result<Config, String> {
    let path = root.join(harn_core::layout::CONFIG);
    let config = match crate::os::private::read_below(root, &path) {
        Ok(Some(bytes)) => {
            let text = harn_core::work::policy::jsonc_to_json(&path.display().to_string(), &bytes)
                .map_err(|e| e.to_string())?;
            serde_json::from_slice::<Config>(&text)
                .map_err(|e| format!("{}:{}: {e}", path.display(), e.line()))?
        }
        Ok(None) => Config::default(),
        Err(e) => return Err(e.to_string()),
    };
    if let Some(v) = config.schema_version.filter(|&v| v != 1) {
        return Err(format!("{}: schema_version {v} is not supported (1 is)", path.display()));
    }
    Ok(config)
}

/// The channels notices go to (`notify`), none when it is absent; a wrong entry is refused
/// naming the file and the field.
pub fn notify_channels(root: &Path) -> Result<Vec<harn_core::notify::ChannelSpec>, String> {
    let Some(value) = read_config(root)?.notify else { return Ok(Vec::new()) };
    harn_core::notify::parse_channels(&value).map_err(|e| {
        let path = root.join(harn_core::layout::CONFIG);
        format!("{}: {}: {}", path.display(), e.field, e.message)
    })
}

/// What every run may reach over the network (`network`): its adapters' vendors when it is
/// absent; a wrong value is refused naming the file and the field.
pub fn network(root: &Path) -> Result<harn_core::work::network::NetworkPolicy, String> {
    let Some(value) = read_config(root)?.network else { return Ok(Default::default()) };
    harn_core::work::network::NetworkPolicy::from_value(&value).map_err(|e| {
        let path = root.join(harn_core::layout::CONFIG);
        format!("{}: {}: {}", path.display(), e.field, e.message)
    })
}

/// The resource limits of every run: the defaults, with what `.harnery/config.json`'s
/// `limits` names over them.
pub fn limits(root: &Path) -> Result<harn_core::limits::ResourceLimits, String> {
    let path = root.join(harn_core::layout::CONFIG);
    let limits = read_config(root)?.limits;
    limits.check().map_err(|e| format!("{}: limits.{e}", path.display()))?;
    Ok(harn_core::limits::RUN_DEFAULTS.with(&limits))
}

/// The paths `.harnery/config.json` lets every confined run write (`containment.writable`).
pub fn writable(root: &Path) -> Result<Vec<String>, String> {
    Ok(read_config(root)?.containment.writable)
}

/// The credentials `.harnery/config.json` lets every run's children have from the
/// environment (`containment.env`), by name; every other one is withheld.
pub fn env(root: &Path) -> Result<Vec<String>, String> {
    Ok(read_config(root)?.containment.env)
}

/// Resolves harness `name` against the root's declared harnesses and the presets, frozen by
/// value with a relative program path made absolute against the root.
pub fn frozen_harness(root: &Path, name: &str) -> Result<FrozenAdapter, String> {
    let path = root.join(harn_core::layout::CONFIG);
    let config = read_config(root)?;
    let mut spec =
        resolve(name, &config.harnesses).map_err(|e| format!("{}: {e}", path.display()))?;
    let program = Path::new(&spec.command[0]);
    if program.is_relative() && spec.command[0].contains('/') {
        spec.command[0] = root.join(program).display().to_string();
    }
    Ok(FrozenAdapter { name: name.to_owned(), spec })
}

/// Cluster `name` of `.harnery/config.json`, checked; an unknown or invalid one is bad input,
/// said with the file and the field.
pub fn cluster(root: &Path, name: &str) -> Result<ClusterSpec, String> {
    let path = root.join(harn_core::layout::CONFIG);
    let mut clusters = read_config(root)?.clusters;
    let Some(spec) = clusters.remove(name) else {
        let known: Vec<&String> = clusters.keys().collect();
        let known = if known.is_empty() {
            "it names none".to_owned()
        } else {
            format!("it names {}", known.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", "))
        };
        return Err(format!("no cluster {name:?} in {} ({known})", path.display()));
    };
    spec.check()
        .map_err(|e| format!("{}: clusters.{name}.{}: {}", path.display(), e.field, e.message))?;
    Ok(spec)
}

/// The adapters `.harnery/config.json` declares, by name.
pub fn declared_adapters(root: &Path) -> Result<Vec<String>, String> {
    Ok(read_config(root)?.harnesses.into_keys().collect())
}
