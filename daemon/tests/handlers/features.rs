//! What one OS's daemon offers and the other's does not (`platform/capability.rs`): a shell
//! session and an in-place upgrade work on Unix; on Windows each is refused as `Unsupported`,
//! with a reason naming the feature and the OS, and the daemon carries on as it was.

use std::time::Instant;

use cuba_protocol::client::{Client, ClientError};
use cuba_protocol::{
    ErrorKind, ErrorReason, ListRequest, ProcKind, ProcState, Request, Response, Signal,
    SignalRequest, UpgradeRequest,
};

use crate::fixture::{bounded, spawn, spawn_running, wait_exit, Daemon, STEP};
use crate::os::{lines, text};

/// The refusal of `feature` on Windows, as a client branches on it.
fn unsupported_on_windows(e: &ClientError, feature: &str) {
    assert_eq!(e.kind(), Some(ErrorKind::Unsupported), "{e}");
    let reason = ErrorReason::Unsupported {
        feature: feature.into(),
        os: "windows".into(),
    };
    assert_eq!(e.reason(), Some(&reason), "{e}");
    let said = format!("cubad on Windows does not offer {feature}: ");
    assert!(e.to_string().contains(&said), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_session_works_on_unix_and_is_unsupported_on_windows() {
    let d = Daemon::start().await;
    let c = d.client().await;
    let in_session = |text: &str| {
        let mut r = d.req(text);
        r.session = Some("s".into());
        r
    };
    let first = in_session("export CUBA_S=kept; cd /");
    if cfg!(windows) {
        let e = bounded("spawn", c.spawn(first)).await.unwrap_err();
        unsupported_on_windows(&e, "shell sessions");
        let rows = bounded("list", c.list(ListRequest::default()))
            .await
            .unwrap();
        assert!(rows.is_empty(), "{rows:?}");
        return;
    }
    let p = spawn(&c, first).await;
    assert_eq!(
        (p.kind, p.session.as_deref()),
        (ProcKind::InSession, Some("s"))
    );
    assert_eq!(wait_exit(&c, p.id).await.process.exit_code, Some(0));
    // The next command of the session sees what the first left: a variable, a directory.
    let p = spawn(&c, in_session("echo \"$CUBA_S\"; pwd")).await;
    let w = wait_exit(&c, p.id).await;
    assert_eq!(w.process.exit_code, Some(0));
    assert_eq!(lines(&w.output.bytes()), ["kept", "/"]);
}

/// Connects until the daemon answers with `upgrades` at least `n` (an upgrade's new program
/// takes a moment to serve), at most [`STEP`].
async fn upgraded(d: &Daemon, n: u32) -> Client {
    let deadline = Instant::now() + STEP;
    loop {
        if let Ok(Ok(c)) = tokio::time::timeout(STEP, d.connect()).await {
            if let Ok(Ok(s)) = tokio::time::timeout(STEP, c.status()).await {
                assert_eq!(s.upgrade_failed, None, "{s:?}");
                if s.upgrades >= n {
                    return c;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "no upgraded daemon within {STEP:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_place_upgrade_works_on_unix_and_is_unsupported_on_windows() {
    let d = Daemon::start().await;
    let c = d.client().await;
    let p = spawn_running(&c, d.req(&text::long())).await;
    let pid = d.pid();
    let upgrade = Request::Upgrade(UpgradeRequest { binary: None });
    let answer = bounded("upgrade", c.call(upgrade)).await;
    let c = if cfg!(windows) {
        unsupported_on_windows(&answer.unwrap_err(), "in-place upgrades");
        // Refused on its own connection, which serves on.
        c
    } else {
        match answer {
            Ok(Response::Upgrading(_)) => {}
            Err(e) if e.connection_lost() => {}
            other => panic!("expected the upgrade to start, got {other:?}"),
        }
        upgraded(&d, 1).await
    };
    let s = bounded("status", c.status()).await.unwrap();
    assert_eq!(s.pid, pid);
    assert_eq!(s.upgrades, u32::from(cfg!(unix)), "{s:?}");
    assert_eq!(s.upgrade_failed, None, "{s:?}");
    // The running command was kept (handed over on Unix, untouched on Windows).
    let row = bounded("info", c.info(p.id)).await.unwrap();
    assert!(row.pid == p.pid && !row.state.is_finished(), "{row:?}");
    let kill = SignalRequest {
        id: p.id,
        signal: Signal::Kill,
        escalate: false,
        grace_ms: None,
        wait: true,
    };
    let row = bounded("kill", c.signal(kill)).await.unwrap();
    assert_eq!(row.state, ProcState::Killed, "{row:?}");
}
