//! Which environment variables are credentials, which a run's children never inherit unless
//! the root's configuration names them (`containment.env` in `.harnery/config.json`): a
//! workflow or an agent that finds a token can act with it outside anything harn contains.

/// Names that are credentials whatever they are called around: an agent's SSH or GPG agent,
/// an X cookie, a cloud's credential file.
const EXACT: &[&str] = &[
    "SSH_AUTH_SOCK",
    "GPG_AGENT_INFO",
    "XAUTHORITY",
    "KUBECONFIG",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "NETRC",
    "DOCKER_AUTH_CONFIG",
    "PGPASSWORD",
    "PGPASSFILE",
    "MYSQL_PWD",
];

/// Words (between `_`) that make a name a credential.
const WORDS: &[&str] = &[
    "TOKEN",
    "TOKENS",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "CREDENTIALS",
    "APIKEY",
    "AUTH",
    "COOKIE",
];

/// Prefixes of whole families of credentials and what points at them.
const PREFIXES: &[&str] = &["AWS_", "AZURE_CLIENT_", "VAULT_"];

/// True when an environment variable named `name` holds (or leads to) a credential:
/// `GITHUB_TOKEN`, `GH_TOKEN`, `NPM_TOKEN`, `HF_TOKEN`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_ACCESS_KEY_ID`, `OPENAI_API_KEY`, `DATABASE_PASSWORD`, `SSH_AUTH_SOCK`. A name is
/// read case-insensitively, word by word: `GIT_AUTHOR_NAME` is not one.
pub fn is_credential(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if upper.starts_with("HARN_") {
        return false;
    }
    if EXACT.contains(&upper.as_str()) || PREFIXES.iter().any(|p| upper.starts_with(p)) {
        return true;
    }
    let words: Vec<&str> = upper.split('_').filter(|w| !w.is_empty()).collect();
    if words.iter().any(|w| WORDS.contains(w)) {
        return true;
    }
    // `…_KEY` and `…_KEY_ID`: an API, access, signing or deploy key and its id.
    matches!(words.as_slice(), [.., _, "KEY"] | [.., _, "KEY", "ID"])
}

/// Of the variables present (`names`), the credentials a run's children get: those `allowed`
/// names, in the order given; every other credential is withheld.
pub fn passed<'a>(names: impl IntoIterator<Item = &'a str>, allowed: &[String]) -> Vec<String> {
    let mut out: Vec<String> = names
        .into_iter()
        .filter(|n| is_credential(n) && allowed.iter().any(|a| a == n))
        .map(str::to_owned)
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_credentials_found_in_the_wild_are_credentials_and_build_variables_are_not() {
        for name in [
            "GITHUB_TOKEN",
            "GH_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ACCESS_KEY_ID",
            "NPM_TOKEN",
            "HF_TOKEN",
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "STRIPE_SECRET",
            "PGPASSWORD_FILE_DB_PASSWORD",
            "DB_PASSWORD",
            "SSH_AUTH_SOCK",
            "deploy_key",
            "NETRC",
        ] {
            assert!(is_credential(name), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "GIT_AUTHOR_NAME",
            "GIT_AUTHOR_EMAIL",
            "TMPDIR",
            "LANG",
            "HARN_RUN_ID",
            "CARGO_TARGET_DIR",
            "KEY",
            "MONKEY",
            "TOKENIZERS_PARALLELISM",
        ] {
            assert!(!is_credential(name), "{name}");
        }
    }

    #[test]
    fn only_named_credentials_pass() {
        let present = ["PATH", "GITHUB_TOKEN", "NPM_TOKEN", "HOME"];
        assert_eq!(passed(present, &["NPM_TOKEN".into(), "PATH".into()]), ["NPM_TOKEN"]);
        assert!(passed(present, &[]).is_empty());
    }
}

/// Where a person keeps credentials in their home directory (relative to it): git's stored
/// credentials, `.netrc`, SSH keys, GitHub's CLI, the clouds', Kubernetes', Docker's and the
/// package registries' logins, GnuPG. A run sees each as empty (a directory) or as
/// `/dev/null` (a file) unless it may write it: naming it in `containment.writable` is how a
/// root gives its runs one.
pub const HOME_PATHS: &[&str] = &[
    ".git-credentials",
    ".config/git/credentials",
    ".netrc",
    ".ssh",
    ".config/gh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".gnupg",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".config/hub",
    ".config/glab-cli",
];

/// The credential paths of `home` ([`HOME_PATHS`]) a run is not given: each one that no
/// `writable` path holds or lies in.
pub fn hidden(home: &str, writable: &[String]) -> Vec<String> {
    let home = home.trim_end_matches('/');
    if home.is_empty() {
        return Vec::new();
    }
    HOME_PATHS
        .iter()
        .map(|p| format!("{home}/{p}"))
        .filter(|p| !writable.iter().any(|w| super::within(p, w) || super::within(w, p)))
        .collect()
}

#[cfg(test)]
mod home_tests {
    use super::*;

    #[test]
    fn every_credential_path_is_hidden_but_what_a_run_may_write() {
        let all = hidden("/home/ana/", &[]);
        assert_eq!(all.len(), HOME_PATHS.len());
        assert!(all.contains(&"/home/ana/.git-credentials".to_owned()));
        let some = hidden("/home/ana", &["/home/ana/.ssh".into(), "/home/ana/.docker/x".into()]);
        assert!(!some.iter().any(|p| p.ends_with("/.ssh") || p.ends_with("/.docker")));
        assert!(some.contains(&"/home/ana/.aws".to_owned()));
        assert!(hidden("", &[]).is_empty());
    }
}
