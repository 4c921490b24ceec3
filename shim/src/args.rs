//! Tool arguments. The doc comments become the JSON schema the model reads: they are written
//! for the model. Unknown fields are refused, so a misspelt argument is an error, not a no-op.

use std::collections::BTreeMap;

use cuba_protocol::StreamFilter;
use schemars::JsonSchema;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::schema::input_schema;

/// Arguments of a struct with a flattened part (`RunArgs`, `StartArgs`). Serde refuses their
/// unknown fields without naming the known ones; this names them, as it does for the other
/// tools, so a misspelt argument comes with its spelling.
#[derive(Debug)]
pub struct Strict<T>(pub T);

impl<'de, T: DeserializeOwned + JsonSchema + 'static> Deserialize<'de> for Strict<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Strict<T>, D::Error> {
        let args = Map::<String, Value>::deserialize(d)?;
        let refused = match serde_json::from_value(Value::Object(args.clone())) {
            Ok(value) => return Ok(Strict(value)),
            Err(e) => e,
        };
        // Only on this error path: the schema lists every field, flattened ones included.
        let schema = input_schema::<T>();
        let Some(Value::Object(known)) = schema.get("properties") else {
            return Err(D::Error::custom(refused));
        };
        match args.keys().find(|k| !known.contains_key(*k)) {
            Some(k) => {
                let names: Vec<String> = known.keys().map(|n| format!("`{n}`")).collect();
                let names = names.join(", ");
                Err(D::Error::custom(format!(
                    "unknown field `{k}`, expected one of {names}"
                )))
            }
            None => Err(D::Error::custom(refused)),
        }
    }
}

// Output stream selection. Inlined, without descriptions: the field says what it is.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum StreamArg {
    // stdout and stderr, interleaved as they were produced.
    #[default]
    Both,
    Stdout,
    Stderr,
}

impl From<StreamArg> for StreamFilter {
    fn from(s: StreamArg) -> StreamFilter {
        match s {
            StreamArg::Both => StreamFilter::Both,
            StreamArg::Stdout => StreamFilter::Stdout,
            StreamArg::Stderr => StreamFilter::Stderr,
        }
    }
}

// What status and wait show.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum ViewArg {
    #[default]
    Text,
    Screen,
}

/// What `run` and `start` say the same way about a command: where and how it runs.
///
/// Flattened into both. Unknown fields are refused by the outer struct's
/// `deny_unknown_fields` (serde checks what no field took, flattened ones included; a test
/// below keeps it so). The attribute would do nothing here: a flattened struct is only
/// offered its own fields.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CommandArgs {
    /// Machine to run on, from list_hosts (default: this one).
    pub host: Option<String>,
    /// Working directory. Relative paths start at the server's directory (the project; on
    /// another host, its home or configured cwd).
    pub cwd: Option<String>,
    /// Environment variables to set on top of the server's environment.
    pub env: Option<BTreeMap<String, String>>,
    /// Hard time limit in ms: the whole process tree is stopped when it is reached. Default: none.
    pub timeout_ms: Option<u64>,
    /// Run on a pseudo-terminal (REPLs, prompts, full-screen programs): answer it with
    /// send_input keys, see it with status/wait view="screen".
    pub tty: Option<bool>,
    /// With tty: terminal width (default 120).
    pub cols: Option<u16>,
    /// With tty: terminal height (default 40).
    pub rows: Option<u16>,
    /// What the command does, declared by you before it runs: every category that plausibly
    /// applies, or ["NONE"] for a read-only command. Categories: NONE, MODIFIES_WORKSPACE_FILES,
    /// MODIFIES_PROTECTED_FILES, MODIFIES_OUTSIDE_WORKSPACE, DELETES_FILES, INSTALLS_DEPENDENCIES,
    /// CHANGES_SYSTEM_CONFIGURATION, BREAKS_OPERATING_SYSTEM, AFFECTS_PRODUCTION_SERVICES,
    /// STOPS_OR_RESTARTS_SERVICES, EXPOSES_SECRETS, CREATES_SECURITY_RISK,
    /// CHANGES_NETWORK_CONFIGURATION, MAKES_NETWORK_REQUESTS, RUNS_PRIVILEGED_COMMANDS,
    /// USES_DESTRUCTIVE_GIT_OPERATION, CONSUMES_SIGNIFICANT_RESOURCES,
    /// GENERATES_EXECUTABLE_CONTENT, BREAKS_OS_USER_SETTINGS, KILLS_AGENT_PROCESS, OTHER, UNKNOWN.
    /// A command declaring a category the user has blocked is refused (BLOCKED) and not run:
    /// then do the task another way or ask the user. Example: ["MAKES_NETWORK_REQUESTS"].
    pub side_effects: Option<Vec<String>>,
}

// `run` and `start` each say their own words about the fields below: the command, stdin (which
// `run` closes and `start` keeps open), shell, name and session.

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
    /// Shell command to run (`/bin/sh -c`): pipes, `&&`, redirections and quoting work.
    pub command: String,
    /// Wait at most this long (ms, default 10000) before returning; a command still running then
    /// keeps running in the background and the reply carries its id and the output so far.
    pub yield_ms: Option<u64>,
    /// Most bytes of output in the reply (default 65536): the first quarter and the last three
    /// quarters are kept, the middle is replaced by a marker saying how much was cut.
    pub max_output: Option<u64>,
    /// Shell to use instead of /bin/sh, e.g. "/bin/bash".
    pub shell: Option<String>,
    /// Text written to the command's stdin, which is then closed. Not with session.
    pub stdin: Option<String>,
    /// A label for the process, shown by list_processes.
    pub name: Option<String>,
    /// Run in the persistent shell of this name (started on first use): `cd`, `export` and
    /// activated environments carry over between calls. One command at a time; not with tty.
    pub session: Option<String>,
    #[serde(flatten)]
    pub common: CommandArgs,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartArgs {
    /// Shell command to run in the background (`/bin/sh -c`), e.g. a dev server.
    pub command: String,
    /// Shell to use instead of /bin/sh.
    pub shell: Option<String>,
    /// Text written to the command's stdin (stdin stays open; close it with send_input eof).
    /// Not with session.
    pub stdin: Option<String>,
    /// A label for the process, shown by list_processes (e.g. "web").
    pub name: Option<String>,
    /// With `name`: if a process of that name runs the same command already, return it instead
    /// of starting a second one.
    pub ensure: Option<bool>,
    /// Run in the persistent shell of this name (see run).
    pub session: Option<String>,
    #[serde(flatten)]
    pub common: CommandArgs,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusArgs {
    /// Host it runs on (ids are per host; default: this machine).
    pub host: Option<String>,
    /// Process id (from run, start or list_processes).
    pub id: u64,
    /// Cursor from a previous reply's `next`: return only output after it. Without it, the
    /// last `tail_bytes` of output are returned.
    pub since: Option<u64>,
    /// Without `since`: how many of the last bytes to return (default 4096).
    pub tail_bytes: Option<u64>,
    /// Which stream to return (default both, interleaved as written).
    pub stream: Option<StreamArg>,
    /// Most bytes of output in the reply (default 65536).
    pub max_output: Option<u64>,
    /// "text" (default): the output; "screen": the terminal screen as a person sees it (tty).
    pub view: Option<ViewArg>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitArgs {
    /// Host it runs on (ids are per host; default: this machine).
    pub host: Option<String>,
    /// Process id.
    pub id: u64,
    /// Cursor from a previous reply's `next`: output (and `until` matching) starts after it.
    /// Default 0: all output.
    pub since: Option<u64>,
    /// Regular expression: return as soon as a line of new output matches, e.g. "listening on".
    pub until: Option<String>,
    /// Return once the output has been quiet for this many ms.
    pub quiet_ms: Option<u64>,
    /// Longest wait in ms (default 30000, at most 55000). Waiting never stops the process.
    pub timeout_ms: Option<u64>,
    /// Which stream to return and match (default both).
    pub stream: Option<StreamArg>,
    /// Most bytes of output in the reply (default 65536).
    pub max_output: Option<u64>,
    /// "text" (default): the new output; "screen": then the terminal screen (tty).
    pub view: Option<ViewArg>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendInputArgs {
    /// Host it runs on (ids are per host; default: this machine).
    pub host: Option<String>,
    /// Process id.
    pub id: u64,
    /// Text to write to stdin. Include "\n" to press Enter.
    pub text: Option<String>,
    /// Keys pressed after `text`, e.g. ["Enter"], ["C-c"], ["Up","Enter"]: Enter, Tab, Esc,
    /// Backspace, Space, Up, Down, Left, Right, Home, End, PageUp, PageDown, Delete, F1-F12,
    /// C-a..C-z, M-<key>.
    pub keys: Option<Vec<String>>,
    /// Close stdin after writing (the program sees end of input; C-d on a terminal).
    pub eof: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendSignalArgs {
    /// Host it runs on (ids are per host; default: this machine).
    pub host: Option<String>,
    /// Process id.
    pub id: u64,
    /// SIGTERM (default; graceful: SIGKILL follows after the grace period if needed), SIGKILL,
    /// SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGSTOP or SIGCONT. Goes to the whole tree.
    pub signal: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Host to list (default: this machine); "*": every host.
    pub host: Option<String>,
    /// Only processes in this state: running, waiting_input, exited, signaled, timed_out,
    /// killed, failed_to_start, lost.
    pub state: Option<String>,
    /// Only processes started by this client (owner name, e.g. "claude-code" or "cubactl").
    pub owner: Option<String>,
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    #[test]
    fn unknown_arguments_are_refused_with_the_shared_fields_flattened() {
        for bad in [
            json!({ "command": "true", "yeild_ms": 5 }),
            json!({ "command": "true", "tty": true, "colls": 80 }),
        ] {
            let e = serde_json::from_value::<RunArgs>(bad.clone()).expect_err("refused");
            assert!(e.to_string().contains("unknown field"), "{bad}: {e}");
            let e = serde_json::from_value::<StartArgs>(bad.clone()).expect_err("refused");
            assert!(e.to_string().contains("unknown field"), "{bad}: {e}");
            let e = serde_json::from_value::<Strict<RunArgs>>(bad.clone()).expect_err("refused");
            assert!(
                e.to_string()
                    .contains(", expected one of `cols`, `command`, `cwd`"),
                "{e}"
            );
        }
        let ok: RunArgs = serde_json::from_value(json!({
            "command": "true", "yield_ms": 5, "tty": true, "cols": 80, "side_effects": ["NONE"]
        }))
        .expect("every field known");
        assert_eq!(ok.yield_ms, Some(5));
        assert_eq!(ok.common.cols, Some(80));
        let ok: StartArgs = serde_json::from_value(json!({ "command": "true", "ensure": true }))
            .expect("every field known");
        assert_eq!(ok.ensure, Some(true));
        // Other errors pass through as serde wrote them.
        let e = serde_json::from_value::<Strict<RunArgs>>(json!({ "command": 5 }))
            .expect_err("refused");
        assert!(e.to_string().contains("invalid type"), "{e}");
        let e = serde_json::from_value::<Strict<RunArgs>>(json!({})).expect_err("refused");
        assert!(e.to_string().contains("missing field `command`"), "{e}");
    }

    #[test]
    fn the_schemas_list_every_field_and_refuse_others() {
        let props = |schema: &serde_json::Map<String, Value>| -> Vec<String> {
            let mut p: Vec<String> = schema["properties"]
                .as_object()
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default();
            p.sort();
            p
        };
        let shared = [
            "cols",
            "cwd",
            "env",
            "host",
            "rows",
            "side_effects",
            "timeout_ms",
            "tty",
        ];
        let mut run: Vec<&str> = ["command", "max_output", "name", "session", "shell"].to_vec();
        run.extend(["stdin", "yield_ms"]);
        let mut start: Vec<&str> = ["command", "ensure", "name", "session", "shell"].to_vec();
        start.push("stdin");
        for (schema, own) in [
            (input_schema::<RunArgs>(), run),
            (input_schema::<StartArgs>(), start),
        ] {
            let mut want: Vec<&str> = own.into_iter().chain(shared).collect();
            want.sort_unstable();
            assert_eq!(props(&schema), want);
            assert_eq!(schema["required"], json!(["command"]));
            assert_eq!(schema["additionalProperties"], json!(false));
        }
    }
}
