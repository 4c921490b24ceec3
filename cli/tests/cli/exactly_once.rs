//! Exactly once through `cubactl`: a proxy between it and `cubad` cuts the connection right
//! after the daemon took the spawn (or the stdin write), before any answer; cubactl connects
//! again and sends the same request with the same token, and the daemon answers with the first
//! attempt's record instead of starting the command again (or writing the input twice).

use crate::common;

use common::{Env, LIMIT};
use cuba_protocol::Request;
use cuba_tests::bounded;
use cuba_tests::proxy::CutProxy;

/// `cubactl args` with its socket pointed at `via`; its stdout, after it exited 0.
async fn through(env: &Env, via: &std::path::Path, args: &[&str]) -> String {
    let mut cmd = env.std_cmd();
    cmd.env("CUBA_EXEC_SOCKET", via).args(args);
    let out = bounded(
        "cubactl",
        LIMIT,
        tokio::task::spawn_blocking(move || cmd.output()),
    )
    .await
    .expect("cubactl did not finish")
    .expect("cannot run cubactl");
    assert!(
        out.status.success(),
        "cubactl {args:?}: {}",
        common::show(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_whose_answer_was_lost_starts_once() {
    let env = Env::new();
    env.ok(&["ps"]);
    let proxy = CutProxy::start(&env.dir().join("p"), env.socket(), |r| {
        matches!(r, Request::Spawn(_))
    });
    let marker = env.dir().join("marker");
    let command = format!("echo x >> {}; exec cat", marker.display());
    let id = through(&env, proxy.path(), &["start", "--", &command]).await;
    assert_eq!(proxy.cuts(), 1, "the first attempt was cut");
    let rows = env.ps();
    assert_eq!(rows.len(), 1, "one record: {rows:?}");
    assert_eq!(rows[0]["id"].to_string(), id.trim());
    // Its input, cut the same way once more: written once.
    let proxy = CutProxy::start(&env.dir().join("q"), env.socket(), |r| {
        matches!(r, Request::Stdin(_))
    });
    through(&env, proxy.path(), &["send", id.trim(), "once", "--eof"]).await;
    assert_eq!(proxy.cuts(), 1);
    env.ok(&["wait", id.trim()]);
    assert_eq!(env.ok(&["logs", id.trim()]), "once\n");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap_or_default(),
        "x\n",
        "ran once"
    );
}
