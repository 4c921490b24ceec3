//! What the daemon keeps: the table of records (`table`, `record`), the journal that outlives
//! it and what restores from it, the event log (`events`), request tokens, the audit log,
//! questions put to a person (`asks`), and who a connection's caller is (`caller`, `genuine`).

pub(crate) mod asks;
pub(crate) mod audit;
pub(crate) mod caller;
pub(crate) mod events;
pub(crate) mod genuine;
pub(crate) mod journal;
pub(crate) mod new_record;
pub(crate) mod person_file;
pub mod private_dir;
pub(crate) mod record;
pub(crate) mod restore;
pub(crate) mod state_dir;
pub(crate) mod table;
pub(crate) mod tokens;
