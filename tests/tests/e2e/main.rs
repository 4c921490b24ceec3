//! End-to-end tests across cubad, cuba-exec and cubactl, one binary (linked once): each
//! module is one concern, its doc comment says which.

mod ask_identity;
mod asks;
mod audit;
mod autostart;
mod budgets;
mod cgroups;
mod connections;
mod descriptors;
mod docs;
mod events;
mod exactly_once;
mod exec_checks;
mod exec_views;
mod full_disk;
mod hostile;
mod hosts_container;
mod hosts_ssh;
mod http;
mod http_fair;
mod http_trust;
mod layout;
mod lifecycle;
mod limits;
mod masks;
mod mcp_hostile;
mod net_proxy;
mod net_proxy_tools;
mod not_a_way_in;
mod output;
mod policy;
mod policy_clients;
mod ports;
mod resource_limits;
mod restart;
mod sandbox;
mod sessions;
mod shared;
mod side_effects;
mod sshd_fixture;
mod symlinks;
mod tenants;
mod tree;
mod trust;
mod tty;
// The socket rule is Linux's (seccomp), and so are the abstract names its tests use.
#[cfg(target_os = "linux")]
mod unix_sockets;
mod upgrade;
mod waiting_input;
