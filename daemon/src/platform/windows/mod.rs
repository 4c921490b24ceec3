//! Windows: what the daemon asks of the system there. So far [`job`] (a command's tree as a Job
//! Object) and [`conpty`] (a command's terminal); the server and supervision come next.

pub mod conpty;
pub mod input;
pub mod job;
