//! A command the policy says to ask about is put to the person through the MCP client that made
//! the call, by elicitation, in whichever era the client speaks: during the call
//! (`elicitation/create`, 2025) or as the call's result (`input_required`, 2026-07-28: the
//! client asks its user and calls again with the answer and our `requestState`). The form is
//! approve once, approve always (its rule, in its directory), or deny with a reason the model is
//! told. A client that cannot ask (no elicitation capability), or whose user did not answer
//! (declined, dismissed, a headless client), leaves the question to the other channels
//! (`cubactl approve`); the model is told what waits and for whom. Passwords are never asked
//! this way: the spec forbids collecting them by form, and `cubactl answer` takes them.

use std::collections::BTreeMap;

use cuba_protocol::client::Client;
use cuba_protocol::{ApproveRequest, Ask, AskKind, DenyRequest, ErrorKind, ProcessInfo};
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequiredResult, ProtocolVersion,
};
use rmcp::service::RequestContext;
use rmcp::RoleServer;

use crate::error::{remote, Failure};

/// The prefix of our `requestState`: what the retry of a call that asked resumes.
const STATE: &str = "cuba-exec/ask/1 ";
/// The answers one call asks for at most (a command approved, then an exec of it held): more
/// is left to the other channels.
pub const MAX_ROUNDS: usize = 4;

/// Which tool a resumed call was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Run,
    Start,
    Wait,
}

/// Where the retry of a call that asked goes on (2026-07-28), kept in `requestState`. The
/// client echoes it untouched; it only names a question, whose answer comes from the client's
/// own `inputResponses`, and the daemon applies an answer only to a question still waiting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    pub tool: Tool,
    pub id: u64,
    pub ask: u64,
    /// The output cursor the call reads from.
    pub since: u64,
    pub host: Option<String>,
}

impl Resume {
    pub fn encode(&self) -> String {
        let tool = match self.tool {
            Tool::Run => "run",
            Tool::Start => "start",
            Tool::Wait => "wait",
        };
        let host = self.host.as_deref().unwrap_or("");
        format!(
            "{STATE}{tool} {} {} {} {host}",
            self.id, self.ask, self.since
        )
    }

    pub fn decode(state: &str) -> Option<Resume> {
        let rest = state.strip_prefix(STATE)?;
        let mut parts = rest.splitn(5, ' ');
        let tool = match parts.next()? {
            "run" => Tool::Run,
            "start" => Tool::Start,
            "wait" => Tool::Wait,
            _ => return None,
        };
        let id = parts.next()?.parse().ok()?;
        let ask = parts.next()?.parse().ok()?;
        let since = parts.next()?.parse().ok()?;
        let host = parts.next().filter(|h| !h.is_empty()).map(String::from);
        Some(Resume {
            tool,
            id,
            ask,
            since,
            host,
        })
    }
}

/// How this call's client can ask its user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// `elicitation/create` during the call.
    During,
    /// `input_required` as the call's result.
    Result,
    /// It cannot (no elicitation capability).
    None,
}

pub fn channel(ctx: &RequestContext<RoleServer>) -> Channel {
    let form = ctx
        .client_capabilities()
        .and_then(|c| c.elicitation)
        // A capability that names neither form nor url is form (the 2025-06-18 shape).
        .is_some_and(|e| e.form.is_some() || e.url.is_none());
    if !form {
        return Channel::None;
    }
    // On a 2026-07-28 connection a request of the server's own is not served (Claude Code
    // drops it): the question goes in the result.
    match ctx
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
    {
        true => Channel::Result,
        false => Channel::During,
    }
}

/// The question of `info` a person can answer in the client: an approval (never a password).
pub fn askable(info: &ProcessInfo) -> Option<&Ask> {
    info.asks.iter().find(|a| a.kind.holds())
}

/// The key of an ask's question among `inputRequests`.
pub fn key(ask: u64) -> String {
    format!("approve-{ask}")
}

/// The ask a key of `inputResponses` answers ([`key`] read back).
pub fn ask_of(key: &str) -> Option<u64> {
    key.strip_prefix("approve-")?.parse().ok()
}

/// The form: the question in words, and approve once / approve always / deny with a reason.
pub fn form(info: &ProcessInfo, ask: &Ask) -> ElicitRequestParams {
    let doing = match ask.kind {
        AskKind::Exec => format!(
            "its command `{}` is about to run `{}`",
            info.command, ask.what
        ),
        AskKind::Network => format!(
            "its command `{}` wants to reach {} (no proxy rule names it)",
            info.command, ask.what
        ),
        _ => format!("it wants to run `{}`", ask.what),
    };
    let message = format!(
        "The agent ({}) needs your approval: {doing} in {} (process {}). The policy asks first \
         ({}). Approve it?",
        info.owner.name, ask.cwd, info.id, ask.rule
    );
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Decision",
                "description": "approve_once: run it this time; approve_always: and do not ask \
                                about this rule in this directory again; deny: do not run it",
                "enum": ["approve_once", "approve_always", "deny"]
            },
            "reason": {
                "type": "string",
                "title": "Reason",
                "description": "Why (a denial's reason is told to the agent)"
            }
        },
        "required": ["decision"]
    });
    // A schema of our own making: it always reads back.
    let requested_schema: ElicitationSchema = serde_json::from_value(schema).unwrap_or_else(|e| {
        tracing::error!("the approval form does not read as a schema: {e}");
        ElicitationSchema::new(BTreeMap::new())
    });
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema,
    }
}

/// What the person answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Once,
    Always,
    Deny(Option<String>),
    /// No answer in the client (declined, dismissed, or not one of the choices): why.
    None(String),
}

/// The decision in an elicitation's result, checked against the form (a client may pass on
/// whatever its user, or a hook, gave).
pub fn decision(client: &str, r: &ElicitResult) -> Decision {
    match r.action {
        ElicitationAction::Decline => {
            return Decision::None(format!("the user declined to answer in {client}"))
        }
        ElicitationAction::Accept => {}
        // Cancel, and whatever later versions add: no answer.
        _ => return Decision::None(format!("the question was dismissed in {client}")),
    }
    let content = r.content.as_ref();
    let field = |name: &str| content.and_then(|c| c.get(name)).and_then(|v| v.as_str());
    let reason = field("reason")
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(|r| r.chars().take(500).collect::<String>());
    match field("decision") {
        Some("approve_once") => Decision::Once,
        Some("approve_always") => Decision::Always,
        Some("deny") => Decision::Deny(reason),
        other => Decision::None(format!(
            "{client} answered {:?}, not one of approve_once, approve_always, deny",
            other.unwrap_or("nothing")
        )),
    }
}

/// What asking the person during a call came to.
pub enum Asked {
    /// Answered (and the answer is with the daemon): look at the process again.
    Answered,
    /// The client cannot ask, or its user did not answer: why, for the reply's hint.
    NotAnswered(String),
    /// The call's result must be this question (2026-07-28).
    Result(InputRequiredResult),
}

/// Asks the person about `info`'s question where the client can; `resume` says where a retry
/// goes on (2026-07-28). `client_name`: how the client calls itself.
pub async fn ask(
    ctx: &RequestContext<RoleServer>,
    client: &Client,
    info: &ProcessInfo,
    resume: Resume,
) -> Result<Asked, Failure> {
    let Some(ask) = askable(info) else {
        return Ok(Asked::NotAnswered("nothing to approve".into()));
    };
    let name = crate::approve::owner_name(ctx);
    // Another client's command: its question belongs to the user who started it there.
    if !mine(info, &name) {
        return Ok(Asked::NotAnswered(format!(
            "{} started it: the question is not {name}'s to ask",
            info.owner.name
        )));
    }
    match channel(ctx) {
        Channel::None => Ok(Asked::NotAnswered(format!(
            "{name} cannot ask its user (it offers no elicitation)"
        ))),
        Channel::Result => {
            let mut requests = BTreeMap::new();
            let q = InputRequest::Elicitation(ElicitRequest::new(form(info, ask)));
            requests.insert(key(ask.id), q);
            let state = Resume {
                ask: ask.id,
                ..resume
            };
            Ok(Asked::Result(InputRequiredResult::new(
                Some(requests),
                Some(state.encode()),
            )))
        }
        Channel::During => {
            let asked = ctx.peer.create_elicitation(form(info, ask));
            // Answered elsewhere first (`cubactl approve`): the client's question is moot.
            let answered_elsewhere = settled(client, info.id, ask.id);
            let result = tokio::select! {
                r = asked => r,
                () = answered_elsewhere => return Ok(Asked::Answered),
                () = ctx.ct.cancelled() => return Err(Failure::new("CANCELLED", "the call was cancelled")),
            };
            let result = match result {
                Ok(r) => r,
                Err(e) => {
                    return Ok(Asked::NotAnswered(format!(
                        "{name} could not ask its user ({e})"
                    )))
                }
            };
            apply(client, info.id, ask.id, decision(&name, &result)).await
        }
    }
}

/// Sends `d` to the daemon as the answer to ask `ask` of process `id`.
pub async fn apply(client: &Client, id: u64, ask: u64, d: Decision) -> Result<Asked, Failure> {
    let sent = match d {
        Decision::None(why) => return Ok(Asked::NotAnswered(why)),
        Decision::Once | Decision::Always => client
            .approve(ApproveRequest {
                id,
                ask: Some(ask),
                always: d == Decision::Always,
                dir: None,
            })
            .await
            .map(|_| ()),
        Decision::Deny(reason) => client
            .deny(DenyRequest {
                id,
                ask: Some(ask),
                reason,
            })
            .await
            .map(|_| ()),
    };
    match sent {
        Ok(()) => Ok(Asked::Answered),
        // Answered through another channel, or timed out, meanwhile: what is, is.
        Err(e) if e.kind() == Some(ErrorKind::InvalidState) => Ok(Asked::Answered),
        Err(e) => Err(remote(e)),
    }
}

/// The answer to ask `ask` among a retry's `inputResponses`.
pub fn answer_of(client: &str, ask: u64, responses: &rmcp::model::InputResponses) -> Decision {
    let Some(value) = responses.get(&key(ask)) else {
        return Decision::None(format!("{client} sent no answer to the question"));
    };
    match serde_json::from_value::<ElicitResult>(value.clone()) {
        Ok(r) => decision(client, &r),
        Err(e) => Decision::None(format!("{client}'s answer does not read ({e})")),
    }
}

/// Resolves once process `id` no longer waits on ask `ask` (answered another way, timed out,
/// or the process ended); never while it does. Woken by the table's changes of awaiting rows.
async fn settled(client: &Client, id: u64, ask: u64) {
    use cuba_protocol::{ListRequest, ProcState, Request, Response};
    let watch = ListRequest {
        state: Some(ProcState::AwaitingApproval),
        ..ListRequest::default()
    };
    let Ok(mut rows) = client.subscribe(Request::WatchTable(watch)).await else {
        return std::future::pending().await;
    };
    while let Some(Ok(Response::List(l))) = rows.next().await {
        let waiting = l
            .processes
            .iter()
            .any(|p| p.id == id && p.asks.iter().any(|a| a.id == ask));
        if !waiting {
            return;
        }
    }
    std::future::pending().await
}

/// The owner name of what `ctx`'s caller starts: an HTTP token's name, else the MCP client's.
pub fn owner_name(ctx: &RequestContext<RoleServer>) -> String {
    if let Some(caller) = crate::http::caller(ctx) {
        return caller.name.clone();
    }
    ctx.client_info()
        .map_or_else(|| "the MCP client".to_string(), |c| c.name)
}

/// Whether `info` was started by the client called `name` (its questions are answered there).
pub fn mine(info: &ProcessInfo, name: &str) -> bool {
    info.owner.kind == cuba_protocol::ClientKind::Mcp && info.owner.name == name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resume_reads_back_as_written() {
        let r = Resume {
            tool: Tool::Wait,
            id: 7,
            ask: 3,
            since: 120,
            host: Some("build box".into()),
        };
        assert_eq!(Resume::decode(&r.encode()), Some(r.clone()));
        let local = Resume { host: None, ..r };
        assert_eq!(Resume::decode(&local.encode()), Some(local));
        assert_eq!(Resume::decode("something else"), None);
        assert_eq!(Resume::decode("cuba-exec/ask/1 fly 1 2 3 "), None);
    }

    #[test]
    fn only_a_choice_of_the_form_is_an_answer() {
        let r = |action, content: serde_json::Value| {
            let mut e = ElicitResult::new(action);
            e.content = Some(content);
            e
        };
        let accept = ElicitationAction::Accept;
        let yes = r(
            accept.clone(),
            serde_json::json!({"decision": "approve_once"}),
        );
        assert_eq!(decision("c", &yes), Decision::Once);
        let always = r(
            accept.clone(),
            serde_json::json!({"decision": "approve_always"}),
        );
        assert_eq!(decision("c", &always), Decision::Always);
        let no = r(
            accept.clone(),
            serde_json::json!({"decision": "deny", "reason": " not now "}),
        );
        assert_eq!(decision("c", &no), Decision::Deny(Some("not now".into())));
        let odd = r(accept, serde_json::json!({"decision": "maybe"}));
        assert!(matches!(decision("c", &odd), Decision::None(_)));
        let declined = ElicitResult::new(ElicitationAction::Decline);
        assert!(matches!(decision("c", &declined), Decision::None(_)));
        let mut responses = rmcp::model::InputResponses::new();
        responses.insert(
            key(5),
            serde_json::json!({"action": "accept", "content": {"decision": "deny"}}),
        );
        assert_eq!(answer_of("c", 5, &responses), Decision::Deny(None));
        assert!(matches!(answer_of("c", 6, &responses), Decision::None(_)));
        assert_eq!(ask_of(&key(12)), Some(12));
        assert_eq!(ask_of("approve-x"), None);
    }
}
