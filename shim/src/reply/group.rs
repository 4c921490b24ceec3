//! The reply of `run` or `start` on a host group: a header with the counts, what failed first
//! (hosts with the same failure on one line), how to follow what still runs, then each distinct
//! output once, after the hosts (`host#id`) that printed it. Compact on purpose: twenty hosts that
//! print the same lines cost one copy of them.

use rmcp::model::CallToolResult;
use serde::Serialize;

use super::{structured, ProcessFacts, ProcessReply};
use crate::error::Failure;

/// What one host of the group gave: its process's reply, or why there is none.
pub struct HostOutcome {
    pub host: String,
    pub reply: Result<ProcessReply, Failure>,
}

/// How the group was reached, for the header, and the reply's bound.
pub struct GroupFacts {
    /// Hosts reached at once.
    pub parallel: usize,
    /// Wall time of the whole call.
    pub time_ms: u64,
    /// Output bytes the sections may carry together; past it a section keeps its line (the
    /// hosts and ids) and says where its output is.
    pub budget: usize,
}

/// A host as `structuredContent.hosts` lists it (in no schema: tools/list is paid in every
/// turn; docs/tools.md names the fields).
#[derive(Debug, Serialize, PartialEq)]
pub struct HostEntry {
    pub host: String,
    /// The process's id on that host; absent when nothing was started there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// The process's state, or `unreachable` / `error` when the call failed there.
    pub state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The cursor to follow a process that has not ended (`since` of wait and status).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<u64>,
}

/// A process reply's shape (what clients validate against the declared schema: `id` 0,
/// `state` "group", the folded text as `output`) plus the hosts.
#[derive(Serialize)]
struct GroupReply {
    #[serde(flatten)]
    reply: ProcessReply,
    hosts: Vec<HostEntry>,
}

/// The longest failure message a summary line quotes (a bridge's error can be pages of ssh).
const MESSAGE_CHARS: usize = 240;

/// `exit:0`, `signal:SIGKILL`, `state:running next:812`: what a header says of a process's
/// end, or of where to read on from while it runs.
fn status_token(r: &ProcessReply) -> String {
    let f = &r.facts;
    match (f.state.as_str(), f.exit_code, &f.signal) {
        ("exited", Some(code), _) => format!("exit:{code}"),
        ("signaled", _, Some(sig)) => format!("signal:{sig}"),
        (state, _, _) if !r.finished => format!("state:{state} next:{}", r.next),
        (state, _, _) => format!("state:{state}"),
    }
}

/// `message` on one line, at most [`MESSAGE_CHARS`] characters.
fn one_line(message: &str) -> String {
    let flat = message.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(MESSAGE_CHARS) {
        Some((i, _)) => format!("{}…", &flat[..i]),
        None => flat,
    }
}

/// What a summary line says of `host` if it failed; `None` when it did not.
fn failure_text(host: &str, reply: &Result<ProcessReply, Failure>) -> Option<String> {
    // The line names the host already; a link's error starts with it too.
    let message = |m: &str| one_line(m.strip_prefix(&format!("host {host}: ")).unwrap_or(m));
    match reply {
        Err(f) if f.code == "UNAVAILABLE" => Some(format!("unreachable: {}", message(&f.message))),
        Err(f) => Some(format!("{}: {}", f.code, message(&f.message))),
        Ok(r) => {
            let code = r.code.as_deref()?;
            let mut t = status_token(r);
            // `exit:1` says all an EXIT's message would; the others explain themselves.
            if code != "EXIT" {
                let why = r.error.as_deref().map(one_line).unwrap_or_default();
                t.push_str(&format!(" {code}: {why}"));
            }
            Some(t)
        }
    }
}

/// `host` or `hosts a b c`, as a summary line starts.
fn named(hosts: &[&str]) -> String {
    match hosts {
        [one] => format!("host {one}"),
        many => format!("hosts {}", many.join(" ")),
    }
}

fn entry(o: &HostOutcome) -> HostEntry {
    match &o.reply {
        Ok(r) => HostEntry {
            host: o.host.clone(),
            id: Some(r.id),
            state: r.facts.state.clone(),
            exit_code: r.facts.exit_code,
            signal: r.facts.signal.clone(),
            code: r.code.clone(),
            error: r.error.clone(),
            next: (!r.finished).then_some(r.next),
        },
        Err(f) => HostEntry {
            host: o.host.clone(),
            id: None,
            state: match f.code {
                "UNAVAILABLE" => "unreachable",
                _ => "error",
            }
            .to_string(),
            exit_code: None,
            signal: None,
            code: Some(f.code.to_string()),
            error: Some(f.message.clone()),
            next: None,
        },
    }
}

/// Hosts whose process printed the same text and ended the same way.
struct Section<'a> {
    status: String,
    output: &'a str,
    failed: bool,
    /// `(host, id)` in the group's order.
    hosts: Vec<(&'a str, u64)>,
}

/// The summary lines: failures (the same failure of several hosts on one line), a process
/// that waits for an answer (its prompt, or the person), and how to follow the ones running.
fn summary(outcomes: &[HostOutcome], text: &mut String) {
    let mut failures: Vec<(String, Vec<&str>)> = Vec::new();
    for o in outcomes {
        if let Some(f) = failure_text(&o.host, &o.reply) {
            match failures.iter_mut().find(|(t, _)| *t == f) {
                Some((_, hosts)) => hosts.push(&o.host),
                None => failures.push((f, vec![&o.host])),
            }
        }
    }
    for (f, hosts) in &failures {
        text.push_str(&format!("\n{}: {f}", named(hosts)));
    }
    let mut first = None;
    for o in outcomes {
        let Ok(r) = &o.reply else { continue };
        if r.finished || r.code.is_some() {
            continue;
        }
        let h = &o.host;
        first = first.or(Some((h, r)));
        // A prompt or a question for the person: its hint, aimed at this host.
        if let (Some(hint), false) = (&r.hint, r.facts.state == "running") {
            let hint = hint.replace("(id=", &format!("(host={h:?}, id="));
            text.push_str(&format!(
                "\nhost {h}: id:{} {} — {hint}",
                r.id,
                status_token(r)
            ));
        }
    }
    if let Some((h, r)) = first {
        text.push_str(&format!(
            "\nstill running: follow one with wait(host={h:?}, id={}, since={}), likewise \
             each host#id with its next; send_signal(host, id) stops one",
            r.id, r.next
        ));
    }
}

/// The folded outputs, failed ones first, within `budget` bytes of output.
fn sections(outcomes: &[HostOutcome], budget: usize, text: &mut String) {
    let mut sections: Vec<Section> = Vec::new();
    for o in outcomes {
        let Ok(r) = &o.reply else { continue };
        let status = status_token(r);
        let same = |s: &&mut Section| s.status == status && s.output == r.output;
        match sections.iter_mut().find(same) {
            Some(s) => s.hosts.push((&o.host, r.id)),
            None => sections.push(Section {
                status,
                output: &r.output,
                failed: r.code.is_some(),
                hosts: vec![(&o.host, r.id)],
            }),
        }
    }
    // Stable: within failed and within the rest, the group's order.
    sections.sort_by_key(|s| !s.failed);
    let mut left = budget;
    for s in &sections {
        let names: Vec<String> = s.hosts.iter().map(|(h, id)| format!("{h}#{id}")).collect();
        text.push_str("\n--- ");
        text.push_str(&names.join(" "));
        if s.hosts.len() > 1 {
            text.push_str(&format!(" ({} hosts)", s.hosts.len()));
        }
        text.push_str(&format!(" [{}]", s.status));
        if s.output.is_empty() {
            continue;
        }
        if s.output.len() > left {
            let (h, id) = s.hosts[0];
            text.push_str(&format!(
                "\n[output of {} bytes left out to keep this reply within {budget} bytes of \
                 output: status(host={h:?}, id={id}) reads it]",
                s.output.len()
            ));
            continue;
        }
        left -= s.output.len();
        text.push('\n');
        text.push_str(s.output.strip_suffix('\n').unwrap_or(s.output));
    }
}

/// The reply for `outcomes` (in the group's order): text and structured content, `isError`
/// when any host failed.
pub fn group_result(outcomes: Vec<HostOutcome>, g: GroupFacts) -> CallToolResult {
    let failed = outcomes
        .iter()
        .filter(|o| failure_text(&o.host, &o.reply).is_some())
        .count();
    let running = outcomes
        .iter()
        .filter(|o| matches!(&o.reply, Ok(r) if !r.finished && r.code.is_none()))
        .count();
    let mut header = format!(
        "[hosts:{} ok:{} failed:{failed}",
        outcomes.len(),
        outcomes.len() - failed
    );
    if running > 0 {
        header.push_str(&format!(" running:{running}"));
    }
    header.push_str(&format!(" parallel:{} time:{}ms]", g.parallel, g.time_ms));
    let mut body = String::new();
    summary(&outcomes, &mut body);
    sections(&outcomes, g.budget, &mut body);
    let body = body.strip_prefix('\n').unwrap_or(&body).to_string();
    let text = match body.is_empty() {
        true => header,
        false => format!("{header}\n{body}"),
    };
    let bytes = outcomes
        .iter()
        .filter_map(|o| o.reply.as_ref().ok())
        .map(|r| r.facts.bytes)
        .sum();
    let reply = GroupReply {
        reply: ProcessReply {
            facts: ProcessFacts {
                state: "group".into(),
                time_ms: g.time_ms,
                bytes,
                ..ProcessFacts::default()
            },
            output: body,
            ..ProcessReply::default()
        },
        hosts: outcomes.iter().map(entry).collect(),
    };
    structured(text, &reply, failed > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(id: u64, exit: i32, output: &str) -> ProcessReply {
        ProcessReply {
            id,
            facts: ProcessFacts {
                state: "exited".into(),
                exit_code: Some(exit),
                ..ProcessFacts::default()
            },
            code: (exit != 0).then(|| "EXIT".to_string()),
            error: (exit != 0).then(|| format!("the command failed with exit code {exit}")),
            output: output.into(),
            finished: true,
            ..ProcessReply::default()
        }
    }

    fn host(name: &str, reply: Result<ProcessReply, Failure>) -> HostOutcome {
        HostOutcome {
            host: name.into(),
            reply,
        }
    }

    fn text(outcomes: Vec<HostOutcome>, budget: usize) -> String {
        let facts = GroupFacts {
            parallel: 8,
            time_ms: 5,
            budget,
        };
        let r = group_result(outcomes, facts);
        r.content
            .first()
            .and_then(|c| c.as_text())
            .map(|t| t.text.clone())
            .unwrap_or_default()
    }

    #[test]
    fn the_same_failure_of_several_hosts_is_one_line_and_outputs_fold() {
        let lost = || Err(Failure::new("UNAVAILABLE", "host x: no route\n  to host"));
        let t = text(
            vec![
                host("a", Ok(ended(1, 0, "same\n"))),
                host("b", Ok(ended(4, 2, "bad\n"))),
                host("c", Ok(ended(2, 0, "same\n"))),
                host("x", lost()),
                host("y", Err(Failure::new("UNAVAILABLE", "no route to host"))),
                host("d", Ok(ended(3, 2, "bad\n"))),
            ],
            1000,
        );
        assert_eq!(
            t,
            "[hosts:6 ok:2 failed:4 parallel:8 time:5ms]\n\
             hosts b d: exit:2\n\
             hosts x y: unreachable: no route to host\n\
             --- b#4 d#3 (2 hosts) [exit:2]\nbad\n\
             --- a#1 c#2 (2 hosts) [exit:0]\nsame"
        );
    }

    #[test]
    fn past_the_budget_a_section_keeps_its_hosts_and_says_where_its_output_is() {
        let big = "x".repeat(600);
        let t = text(
            vec![
                host("a", Ok(ended(1, 1, &big))),
                host("b", Ok(ended(2, 0, &big))),
            ],
            1000,
        );
        assert!(t.contains(&format!("--- a#1 [exit:1]\n{big}\n--- b#2 [exit:0]\n")));
        assert!(
            t.ends_with(
                "[output of 600 bytes left out to keep this reply within 1000 bytes of \
                 output: status(host=\"b\", id=2) reads it]"
            ),
            "{t}"
        );
    }

    #[test]
    fn a_process_waiting_for_an_answer_says_so_on_its_host() {
        let mut asking = ended(7, 0, "Name? ");
        asking.finished = false;
        asking.facts.state = "waiting_input".into();
        asking.facts.exit_code = None;
        asking.next = 6;
        asking.hint = Some("waiting for input: send_input(id=7, text=\"...\\n\")".into());
        let t = text(vec![host("a", Ok(asking))], 1000);
        assert_eq!(
            t,
            "[hosts:1 ok:1 failed:0 running:1 parallel:8 time:5ms]\n\
             host a: id:7 state:waiting_input next:6 — waiting for input: \
             send_input(host=\"a\", id=7, text=\"...\\n\")\n\
             still running: follow one with wait(host=\"a\", id=7, since=6), likewise each \
             host#id with its next; send_signal(host, id) stops one\n\
             --- a#7 [state:waiting_input next:6]\nName? "
        );
    }
}
