//! The environment a `run` or `start` gives its command: the call's `env` over defaults for a
//! program that has no terminal to page or draw on.

use std::collections::BTreeMap;

/// Agent runs without a terminal: pagers must not wait for a key, and programs should not draw.
/// A run on a terminal gets none of these: it has a terminal to draw on.
const NO_TERMINAL: [(&str, &str); 3] = [("PAGER", "cat"), ("GIT_PAGER", "cat"), ("TERM", "dumb")];

/// The call's `env`, over the no-terminal defaults (which the call may override) unless the
/// command runs on a terminal.
pub fn with_defaults(env: Option<BTreeMap<String, String>>, tty: bool) -> cuba_protocol::Env {
    let mut env = env.unwrap_or_default();
    if !tty {
        for (k, v) in NO_TERMINAL {
            env.entry(k.to_string()).or_insert_with(|| v.to_string());
        }
    }
    env.into_iter().map(|(k, v)| (k.into(), v.into())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(env: &'a cuba_protocol::Env, name: &str) -> Option<&'a std::ffi::OsStr> {
        env.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_os_str())
    }

    #[test]
    fn pipes_get_the_defaults_and_the_call_wins() {
        let call = BTreeMap::from([("PAGER".to_string(), "less".to_string())]);
        let env = with_defaults(Some(call), false);
        assert_eq!(get(&env, "PAGER"), Some("less".as_ref()));
        assert_eq!(get(&env, "TERM"), Some("dumb".as_ref()));
        let env = with_defaults(None, true);
        assert_eq!(
            get(&env, "TERM"),
            None,
            "a terminal keeps the server's TERM"
        );
    }
}
