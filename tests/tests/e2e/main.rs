//! End-to-end tests across cubad, cuba-exec and cubactl, one binary (linked once): each
//! module is one concern, its doc comment says which.

mod ask_identity;
mod asks;
mod audit;
mod autostart;
mod cgroups;
mod connections;
mod descriptors;
mod exactly_once;
mod exec_checks;
mod exec_views;
mod full_disk;
mod hostile;
mod hosts_ssh;
mod http;
mod http_trust;
mod layout;
mod lifecycle;
mod limits;
mod mcp_hostile;
mod output;
mod policy;
mod policy_clients;
mod resource_limits;
mod restart;
mod sandbox;
mod sessions;
mod shared;
mod side_effects;
mod sshd_fixture;
mod symlinks;
mod tree;
mod trust;
mod tty;
mod upgrade;
mod waiting_input;
