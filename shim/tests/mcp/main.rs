//! The MCP server end to end, one binary (linked once): through rmcp's client, in process and
//! as the real `cuba-exec` binary; each module is one concern, its doc comment says which.

mod command_line;
mod common;
mod mcp_agent_budgets;
mod mcp_asks;
mod mcp_background;
mod mcp_binary;
mod mcp_budgets;
mod mcp_cancel;
mod mcp_clients;
mod mcp_containers;
mod mcp_errors;
mod mcp_exactly_once;
mod mcp_exec_corpus;
mod mcp_fanout;
mod mcp_hosts;
mod mcp_hosts_errors;
mod mcp_idle;
mod mcp_leftover;
mod mcp_lost;
mod mcp_pods;
mod mcp_policy;
mod mcp_ports;
mod mcp_shared;
mod mcp_tasks;
mod mcp_terminals;
mod mcp_tools;
mod mcp_upgrade;
mod sessions;
