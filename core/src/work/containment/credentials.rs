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
