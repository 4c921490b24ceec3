//! `cubactl` end to end, one binary (linked once): the real binary against a real daemon; each
//! module is one concern, its doc comment says which.

mod attach;
mod bridge;
mod bridges;
mod common;
mod control;
mod daemon;
mod exactly_once;
mod hosts;
mod output;
mod sessions;
mod setup;
mod smoke;
mod table;
mod terminal;
mod vocabulary;
