//! Windows: what the daemon asks of the system there. So far [`job`] (a command's tree as a Job
//! Object); the server, supervision and ConPTY terminals come next.

pub mod job;
