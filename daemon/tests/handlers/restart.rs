//! The journal: records outlive the daemon. Stopped and started again on the same state
//! directory, it lists the ended record with its exit code and output, answers a retry of its
//! request token with it, and numbers new records after it.

use cuba_protocol::{ListRequest, ProcState, RequestToken, Stream};

use crate::fixture::{bounded, spawn, wait_exit, Daemon};
use crate::os::{lines, stream, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_record_its_output_and_its_token_outlive_a_restart() {
    let mut d = Daemon::start().await;
    let c = d.client().await;
    let mut req = d.req(&text::both_streams("kept", "across", 9));
    req.name = Some("journalled".into());
    req.token = Some(RequestToken::fresh());
    let p = spawn(&c, req.clone()).await;
    let before = wait_exit(&c, p.id).await;
    assert_eq!(before.process.exit_code, Some(9));
    drop(c);
    let old_pid = d.pid();
    d.restart().await;
    assert_ne!(d.pid(), old_pid);

    let c = d.client().await;
    let status = bounded("status", c.status()).await.unwrap();
    assert_eq!((status.pid, status.running, status.total), (d.pid(), 0, 1));
    let rows = bounded("list", c.list(ListRequest::default()))
        .await
        .unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!((row.id, row.pid), (p.id, p.pid));
    assert_eq!((row.state, row.exit_code), (ProcState::Exited, Some(9)));
    assert_eq!(row.name.as_deref(), Some("journalled"));
    assert_eq!(row.command, req.command);
    assert_eq!(row.ended_at_ms, before.process.ended_at_ms);
    let after = wait_exit(&c, p.id).await;
    assert_eq!(after.output.bytes(), before.output.bytes());
    assert_eq!(lines(&stream(&after, Stream::Stdout)), ["kept"]);
    assert_eq!(lines(&stream(&after, Stream::Stderr)), ["across"]);
    // A retry of the request, after the restart, is answered with the record: nothing runs.
    let again = spawn(&c, req).await;
    assert_eq!((again.id, again.state), (p.id, ProcState::Exited));
    // A new record is numbered after the restored one.
    let next = spawn(&c, d.req(&text::echo("next"))).await;
    assert!(next.id > p.id, "{next:?}");
    wait_exit(&c, next.id).await;
}
