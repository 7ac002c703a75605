//! A run's network: the policy frozen with it (`"network"` in `.harnery/config.json`, or
//! `--network`), and the endpoints it lets the run reach. Decided here; held by the shell
//! outside the run (a network namespace whose only way out is a proxy harn runs, which asks
//! [`Allowed::allows`] of every connection and records each one it refused).

use serde::{Deserialize, Serialize};

/// What a run may reach.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum NetworkPolicy {
    /// The hosts its adapters need (each preset's, or the adapter's own `hosts`), and the
    /// endpoint of a base-URL override: the default.
    #[default]
    Adapters,
    /// Nothing: not even the adapters' vendors.
    None,
    /// The machine's whole network, as before network policies.
    Open,
    /// Exactly these endpoints.
    Hosts(Vec<Endpoint>),
}

/// A host (a name, `*.` and a domain for any name below it, or an address) and a port.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Endpoint {
    /// The host, lowercase; IPv6 addresses without brackets.
    pub host: String,
    /// The port.
    pub port: u16,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.host.contains(':') {
            true => write!(f, "[{}]:{}", self.host, self.port),
            false => write!(f, "{}:{}", self.host, self.port),
        }
    }
}

impl Endpoint {
    /// Reads `host:port` (`[::1]:8080` for an IPv6 address; `*.example.com:443` for any name
    /// below a domain).
    pub fn parse(text: &str) -> Result<Endpoint, EndpointError> {
        let text = text.trim();
        let (host, port) = match text.strip_prefix('[') {
            Some(rest) => rest.split_once("]:").ok_or(EndpointError::NoPort { bracketed: true })?,
            None => text.rsplit_once(':').ok_or(EndpointError::NoPort { bracketed: false })?,
        };
        let port: u16 = port.parse().map_err(|_| EndpointError::NotAPort(port.to_owned()))?;
        if port == 0 {
            return Err(EndpointError::PortZero);
        }
        let host = host.to_ascii_lowercase();
        let name = host.strip_prefix("*.").unwrap_or(&host);
        let ok = !name.is_empty()
            && name.len() <= 253
            && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'));
        if !ok {
            return Err(EndpointError::NotAHost(host));
        }
        Ok(Endpoint { host, port })
    }

    /// The endpoint a URL names (`https://api.example.com/v1` is `api.example.com:443`).
    pub fn of_url(url: &str) -> Option<Endpoint> {
        let (scheme, rest) = url.trim().split_once("://")?;
        let default = match scheme.to_ascii_lowercase().as_str() {
            "https" | "wss" => 443,
            "http" | "ws" => 80,
            _ => return None,
        };
        let authority = rest.split(['/', '?', '#']).next()?;
        let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
        let with_port = match authority.rsplit_once(':') {
            Some((_, p))
                if !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()) && !p.contains(']') =>
            {
                authority.to_owned()
            }
            _ => format!("{authority}:{default}"),
        };
        Endpoint::parse(&with_port).ok()
    }

    /// True when this endpoint lets a connection to `host`:`port` through.
    pub fn admits(&self, host: &str, port: u16) -> bool {
        if self.port != port {
            return false;
        }
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        match self.host.strip_prefix("*.") {
            Some(domain) => host.strip_suffix(domain).is_some_and(|p| p.ends_with('.')),
            None => self.host == host,
        }
    }
}

/// Why a `host:port` did not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndpointError {
    /// No `:PORT` (after `[ADDRESS]` when bracketed).
    NoPort {
        /// True for an `[ADDRESS]` form.
        bracketed: bool,
    },
    /// The port is not a number from 1 to 65535.
    NotAPort(String),
    /// Port 0.
    PortZero,
    /// The host is not a name or an address.
    NotAHost(String),
}

impl std::fmt::Display for EndpointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndpointError::NoPort { bracketed: true } => f.write_str("expected [ADDRESS]:PORT"),
            EndpointError::NoPort { bracketed: false } => f.write_str("expected HOST:PORT"),
            EndpointError::NotAPort(p) => write!(f, "{p:?} is not a port"),
            EndpointError::PortZero => f.write_str("port 0 is no port"),
            EndpointError::NotAHost(h) => write!(f, "{h:?} is not a host name or address"),
        }
    }
}

/// Why a network policy did not parse: the field (`network`, `network[2]`) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkError {
    /// The field.
    pub field: String,
    /// Why.
    pub message: String,
}

impl std::fmt::Display for NetworkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

const EXPECTED: &str = "expected \"adapters\", \"none\", \"open\" or a list of \"host:port\"";

impl NetworkPolicy {
    /// Reads the policy from a configuration's `network` value.
    pub fn from_value(value: &serde_json::Value) -> Result<NetworkPolicy, NetworkError> {
        let err = |field: String, message: String| NetworkError { field, message };
        match value {
            serde_json::Value::String(s) => match s.as_str() {
                "adapters" => Ok(NetworkPolicy::Adapters),
                "none" => Ok(NetworkPolicy::None),
                "open" => Ok(NetworkPolicy::Open),
                other => Err(err("network".into(), format!("{other:?}: {EXPECTED}"))),
            },
            serde_json::Value::Array(items) => {
                let mut hosts = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    let field = format!("network[{i}]");
                    let text = item.as_str().ok_or_else(|| err(field.clone(), EXPECTED.into()))?;
                    hosts.push(Endpoint::parse(text).map_err(|m| err(field, m.to_string()))?);
                }
                Ok(NetworkPolicy::Hosts(hosts))
            }
            _ => Err(err("network".into(), EXPECTED.into())),
        }
    }

    /// Reads `--network`: `adapters`, `none`, `open`, or `host:port` entries separated by
    /// commas.
    pub fn from_flag(text: &str) -> Result<NetworkPolicy, NetworkError> {
        match text.trim() {
            "adapters" | "none" | "open" => Self::from_value(&serde_json::json!(text.trim())),
            list => {
                let items: Vec<serde_json::Value> =
                    list.split(',').map(|s| serde_json::json!(s.trim())).collect();
                Self::from_value(&serde_json::Value::Array(items)).map_err(|e| NetworkError {
                    field: e.field.replacen("network", "--network", 1),
                    message: e.message,
                })
            }
        }
    }

    /// As `--network` takes it.
    pub fn to_flag(&self) -> String {
        match self {
            NetworkPolicy::Hosts(h) => {
                h.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(",")
            }
            other => other.to_value().as_str().unwrap_or_default().to_owned(),
        }
    }

    /// The value a configuration or a manifest holds.
    pub fn to_value(&self) -> serde_json::Value {
        match self {
            NetworkPolicy::Adapters => "adapters".into(),
            NetworkPolicy::None => "none".into(),
            NetworkPolicy::Open => "open".into(),
            NetworkPolicy::Hosts(h) => h.iter().map(|e| e.to_string()).collect(),
        }
    }
}

impl Serialize for NetworkPolicy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for NetworkPolicy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<NetworkPolicy, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        NetworkPolicy::from_value(&value).map_err(serde::de::Error::custom)
    }
}

impl Serialize for Endpoint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_string().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Endpoint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Endpoint, D::Error> {
        let text = String::deserialize(d)?;
        Endpoint::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// What a run may reach, resolved when it starts: everything, or exactly these endpoints.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allowed {
    /// The whole network (`open`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub open: bool,
    /// The endpoints, otherwise (none: `none`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<Endpoint>,
}

impl Allowed {
    /// True when a connection to `host`:`port` may go through.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        self.open || self.endpoints.iter().any(|e| e.admits(host, port))
    }

    /// In a few words, for `run show`.
    pub fn summary(&self) -> String {
        match (self.open, self.endpoints.is_empty()) {
            (true, _) => "open (the machine's network)".into(),
            (false, true) => "none".into(),
            (false, false) => {
                let shown: Vec<String> = self.endpoints.iter().map(|e| e.to_string()).collect();
                format!("only {} (through harn's proxy)", shown.join(", "))
            }
        }
    }
}

/// Resolves `policy` for a run whose adapters need `adapters` (each preset's hosts, or the
/// adapter's own) and whose base-URL overrides name `overrides`.
pub fn resolve(policy: &NetworkPolicy, adapters: &[Endpoint], overrides: &[Endpoint]) -> Allowed {
    let mut endpoints = match policy {
        NetworkPolicy::Open => return Allowed { open: true, endpoints: Vec::new() },
        NetworkPolicy::None => Vec::new(),
        NetworkPolicy::Hosts(h) => h.clone(),
        NetworkPolicy::Adapters => adapters.iter().chain(overrides).cloned().collect(),
    };
    endpoints.sort();
    endpoints.dedup();
    Allowed { open: false, endpoints }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(s: &str) -> Endpoint {
        Endpoint::parse(s).unwrap()
    }

    #[test]
    fn policies_parse_from_configuration_and_flag_and_bad_ones_name_their_field() {
        use serde_json::json;
        assert_eq!(NetworkPolicy::from_value(&json!("none")), Ok(NetworkPolicy::None));
        let list = NetworkPolicy::from_value(&json!(["pypi.org:443", "[::1]:8080"])).unwrap();
        assert_eq!(list, NetworkPolicy::Hosts(vec![ep("pypi.org:443"), ep("[::1]:8080")]));
        assert_eq!(list.to_value(), json!(["pypi.org:443", "[::1]:8080"]));
        let back: NetworkPolicy = serde_json::from_value(list.to_value()).unwrap();
        assert_eq!(back, list);
        let e = NetworkPolicy::from_value(&json!("closed")).unwrap_err();
        assert_eq!(e.field, "network");
        let e = NetworkPolicy::from_value(&json!(["a:1", "b"])).unwrap_err();
        assert_eq!((e.field.as_str(), e.message.as_str()), ("network[1]", "expected HOST:PORT"));
        let e = NetworkPolicy::from_value(&json!(["a:http"])).unwrap_err();
        assert!(e.message.contains("not a port"), "{e}");
        assert_eq!(NetworkPolicy::from_flag("open"), Ok(NetworkPolicy::Open));
        assert_eq!(NetworkPolicy::from_flag(&list.to_flag()), Ok(list.clone()));
        assert_eq!(NetworkPolicy::Adapters.to_flag(), "adapters");
        let e = NetworkPolicy::from_flag("a:1,b c:2").unwrap_err();
        assert_eq!(e.field, "--network[1]");
        assert!(Endpoint::parse("a:0").is_err() && Endpoint::parse("a b:1").is_err());
    }

    #[test]
    fn a_url_names_its_endpoint_with_the_schemes_port() {
        assert_eq!(Endpoint::of_url("https://api.openai.com/v1"), Some(ep("api.openai.com:443")));
        assert_eq!(Endpoint::of_url("http://127.0.0.1:8123/v1"), Some(ep("127.0.0.1:8123")));
        assert_eq!(Endpoint::of_url("http://u:p@Host.example"), Some(ep("host.example:80")));
        assert_eq!(Endpoint::of_url("ftp://x"), None);
    }

    #[test]
    fn only_what_a_policy_names_is_allowed_and_a_wildcard_means_below_its_domain() {
        let adapters = [ep("api.anthropic.com:443")];
        let overrides = [ep("127.0.0.1:8123")];
        let a = resolve(&NetworkPolicy::Adapters, &adapters, &overrides);
        assert!(a.allows("api.anthropic.com", 443) && a.allows("127.0.0.1", 8123));
        assert!(!a.allows("api.anthropic.com", 80) && !a.allows("github.com", 443));
        assert!(
            !resolve(&NetworkPolicy::None, &adapters, &overrides).allows("api.anthropic.com", 443)
        );
        assert!(resolve(&NetworkPolicy::Open, &[], &[]).allows("anything", 1));
        let w = resolve(&NetworkPolicy::Hosts(vec![ep("*.pypi.org:443")]), &adapters, &[]);
        assert!(w.allows("files.pypi.org", 443) && !w.allows("pypi.org", 443));
        assert!(!w.allows("evilpypi.org", 443) && !w.allows("api.anthropic.com", 443));
        assert_eq!(resolve(&NetworkPolicy::None, &[], &[]).summary(), "none");
    }
}
