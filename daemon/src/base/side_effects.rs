//! Side-effect declarations: the optional `side_effects` of a spawn request, in YieldShell's
//! categories (`cuba_protocol::SIDE_EFFECTS`), checked against the daemon's blocked set.
//!
//! A declaration is the caller's word: nothing here verifies that a command really does (or
//! does not do) what it declares. It lets an honest agent be told "not here" before it runs
//! something it knows is risky; the command policy and the sandbox are what hold against a
//! dishonest one.

use std::collections::BTreeSet;

use anyhow::{bail, Result};
use cuba_protocol::{
    side_effect_name, ErrorKind, ErrorReason, PolicyDecision, ProtocolError, SIDE_EFFECTS,
};

/// The rule name in `BLOCKED` messages and audit lines.
pub const RULE: &str = "side_effects";

/// Blocked unless configured otherwise: the categories that describe damage rather than work.
pub const DEFAULT_BLOCKED: &[&str] = &[
    "MODIFIES_PROTECTED_FILES",
    "BREAKS_OPERATING_SYSTEM",
    "BREAKS_OS_USER_SETTINGS",
    "KILLS_AGENT_PROCESS",
];

pub fn default_blocked() -> BTreeSet<String> {
    DEFAULT_BLOCKED.iter().map(|c| c.to_string()).collect()
}

fn valid_list() -> String {
    SIDE_EFFECTS.join(", ")
}

/// A comma-separated list of categories (`CUBA_EXEC_BLOCKED_SIDE_EFFECTS`); names are
/// case-insensitive, empty entries are skipped, an unknown name is an error listing the valid
/// ones.
pub fn parse_list(text: &str) -> Result<BTreeSet<String>> {
    let mut set = BTreeSet::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match side_effect_name(item) {
            Some(name) => {
                set.insert(name.to_string());
            }
            None => bail!(
                "unknown side-effect category {item:?}; valid categories: {}",
                valid_list()
            ),
        }
    }
    Ok(set)
}

/// Why a declaration was refused.
pub enum Refusal {
    /// Unknown name, or `NONE` combined with another category: `BAD_REQUEST`, not audited.
    Bad(ProtocolError),
    /// A declared category is in the blocked set: `BLOCKED`, audited with this decision.
    Blocked(ProtocolError, Box<PolicyDecision>),
}

/// Checks `declared` against `blocked`. Nothing declared passes.
pub fn check(declared: &[String], blocked: &BTreeSet<String>) -> Result<(), Refusal> {
    let mut names = Vec::with_capacity(declared.len());
    for item in declared {
        match side_effect_name(item) {
            Some(name) => names.push(name),
            None => {
                return Err(Refusal::Bad(ProtocolError::new(
                    ErrorKind::BadRequest,
                    format!(
                        "unknown side-effect category {item:?}; valid categories: {}",
                        valid_list()
                    ),
                )))
            }
        }
    }
    if names.contains(&"NONE") && names.iter().any(|n| *n != "NONE") {
        return Err(Refusal::Bad(ProtocolError::new(
            ErrorKind::BadRequest,
            "side-effect category NONE means no side effects and cannot be combined with others",
        )));
    }
    let hits: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| blocked.contains(*n))
        .collect();
    let Some(first) = hits.first() else {
        return Ok(());
    };
    let list = hits.join(", ");
    let message = format!(
        "the command declares side effect {list}, which this daemon blocks (rule {RULE}); \
         nothing was run. Do it another way, or ask the user to run it"
    );
    let decision = PolicyDecision {
        allowed: false,
        rule: Some(RULE.to_string()),
        offending: Some(first.to_string()),
        commands: Vec::new(),
        message: message.clone(),
        nested: Vec::new(),
        ask: None,
    };
    let error = ProtocolError::new(ErrorKind::Blocked, message.clone())
        .because(ErrorReason::SideEffectBlocked);
    Err(Refusal::Blocked(error, Box::new(decision)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn lists_parse_case_insensitively_and_reject_unknown_names() {
        let set = parse_list(" makes_network_requests, DELETES_FILES ,,").unwrap();
        assert_eq!(
            set,
            strings(&["DELETES_FILES", "MAKES_NETWORK_REQUESTS"])
                .into_iter()
                .collect()
        );
        assert!(parse_list("").unwrap().is_empty());
        let err = parse_list("network").unwrap_err().to_string();
        assert!(
            err.contains("\"network\"") && err.contains("MAKES_NETWORK_REQUESTS"),
            "{err}"
        );
    }

    #[test]
    fn declarations_are_checked() {
        let blocked = parse_list("MAKES_NETWORK_REQUESTS,DELETES_FILES").unwrap();
        assert!(check(&[], &blocked).is_ok());
        assert!(check(&strings(&["modifies_workspace_files"]), &blocked).is_ok());
        assert!(check(&strings(&["NONE"]), &blocked).is_ok());
        match check(
            &strings(&["MODIFIES_WORKSPACE_FILES", "deletes_files"]),
            &blocked,
        ) {
            Err(Refusal::Blocked(e, d)) => {
                assert_eq!(e.kind, ErrorKind::Blocked);
                assert!(e.message.contains("side_effects") && e.message.contains("DELETES_FILES"));
                assert_eq!(d.offending.as_deref(), Some("DELETES_FILES"));
            }
            _ => panic!("expected Blocked"),
        }
        match check(&strings(&["network"]), &blocked) {
            Err(Refusal::Bad(e)) => {
                assert_eq!(e.kind, ErrorKind::BadRequest);
                assert!(
                    e.message.contains("MAKES_NETWORK_REQUESTS"),
                    "{}",
                    e.message
                );
            }
            _ => panic!("expected Bad"),
        }
        assert!(matches!(
            check(&strings(&["NONE", "OTHER"]), &blocked),
            Err(Refusal::Bad(_))
        ));
    }
}
