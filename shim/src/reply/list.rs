//! The rows of `list_processes` and the reply that carries them.

use cuba_protocol::ProcessInfo;
use schemars::JsonSchema;
use serde::Serialize;

use super::{host_name, ProcessFacts};

/// A row of `list_processes`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ProcessRow {
    pub id: u64,
    #[schemars(skip)]
    pub pid: u32,
    pub owner: String,
    #[serde(flatten)]
    pub facts: ProcessFacts,
    /// The command, shortened.
    pub command: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ListReply {
    pub processes: Vec<ProcessRow>,
    /// Finished processes that matched but were left out by `limit`.
    pub hidden: u64,
    /// Running processes that matched but were left out (over 50, or `limit`).
    pub hidden_running: u64,
    /// With a group (`*`, `web*`, `a,b`): the hosts that could not be listed, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreachable: Vec<HostError>,
    /// Each agent's use against its budget: `agent-1: cpu 0.4/0.5, memory 80 MiB/512 MiB`
    /// (in no schema, like the figures).
    #[schemars(skip)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<String>,
}

/// A host that did not answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct HostError {
    pub host: String,
    pub error: String,
}

impl ProcessRow {
    /// The row names `host` (when it is not this machine).
    pub fn on(mut self, host: Option<&str>) -> ProcessRow {
        self.facts.host = host_name(host);
        self
    }

    /// The row names `host`, this machine included.
    pub fn named(mut self, host: &str) -> ProcessRow {
        self.facts.host = Some(host.to_string());
        self
    }

    pub fn from_info(info: &ProcessInfo, now: u64) -> ProcessRow {
        let mut command: String = info.command.replace('\n', " ").chars().take(80).collect();
        if info.command.chars().count() > 80 {
            command.push('…');
        }
        ProcessRow {
            id: info.id,
            pid: info.pid,
            owner: info.owner.name.clone(),
            facts: ProcessFacts::of(info, now),
            command,
        }
    }

    pub fn line(&self) -> String {
        let f = &self.facts;
        let mut l = format!("id:{} pid:{}", self.id, self.pid);
        l.push_str(&f.where_tokens());
        l.push(' ');
        l.push_str(&f.state);
        if let Some(c) = f.exit_code {
            l.push_str(&format!(" exit:{c}"));
        }
        if let Some(s) = &f.signal {
            l.push_str(&format!(" signal:{s}"));
        }
        l.push_str(&format!(
            " time:{}ms bytes:{} owner:{}",
            f.time_ms, f.bytes, self.owner
        ));
        if let Some(n) = &f.name {
            l.push_str(&format!(" name:{n}"));
        }
        let usage = [("cpu:", f.cpu_ms, "ms"), ("mem:", f.mem_bytes, "")];
        for (key, value, unit) in usage.iter().filter_map(|(k, v, u)| Some((k, (*v)?, u))) {
            l.push_str(&format!(" {key}{value}{unit}"));
        }
        if let Some(s) = &f.spool {
            l.push_str(&format!(" [{s}]"));
        }
        l.push_str(" $ ");
        l.push_str(&self.command);
        l
    }
}
