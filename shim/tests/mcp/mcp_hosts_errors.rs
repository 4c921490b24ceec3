//! Hosts that cannot be used, through MCP: each error says what to do, and a `command`
//! bridge works as ssh does.

use crate::common;

use common::hosts::{cubactl_bin, Hosts};
use common::TestDir;
use serde_json::json;

/// A stand-in for a daemon of another protocol version at the far end of a bridge: it reads
/// the hello and answers with the fixed-layout reply prefix of version `version`, as any
/// version of cubad does.
fn other_version(version: u32) -> Vec<String> {
    let script = format!(
        "import struct,sys\nr=sys.stdin.buffer\nn=struct.unpack('>I',r.read(4))[0]\nr.read(n)\n\
         body=b'CUBA'+struct.pack('>II',{version},4242)+b'\\x01'+b'protocol mismatch'\n\
         sys.stdout.buffer.write(struct.pack('>I',len(body))+body)\nsys.stdout.buffer.flush()\n\
         r.read()\n"
    );
    vec!["python3".into(), "-c".into(), script]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_bridge_works_as_ssh_does() {
    let mut w = Hosts::new().await;
    let other = TestDir::with_daemon().await;
    let bridge = format!(
        "exec {} --socket {} bridge",
        cubactl_bin().display(),
        other.socket().display()
    );
    w.command_host("pod", &["sh".into(), "-c".into(), bridge]);
    let c = w.shim("agent", &[]).await;
    let r = c
        .call(
            "run",
            json!({ "command": "echo through-pod; exit 3", "host": "pod" }),
        )
        .await;
    assert!(r.is_error(), "exit 3 is an error: {}", r.text());
    assert_eq!(r.sc()["exit_code"], 3, "{}", r.text());
    assert_eq!(r.output(), "through-pod\n");
    let id = r.id();
    // It ran in the daemon at the far end of the bridge, which knows it by that id.
    let me = cuba_protocol::client::this_client(cuba_protocol::ClientKind::Other, "check");
    let far = cuba_protocol::client::Client::connect(&other.socket(), me)
        .await
        .expect("connect to the far daemon");
    let there = far.info(id).await.expect("the far daemon has the process");
    assert_eq!(there.command, "echo through-pod; exit 3", "{there:?}");
    assert_eq!(there.exit_code, Some(3), "{there:?}");
    let rows = c.rows(json!({ "host": "pod" })).await;
    assert!(rows.iter().any(|r| r["id"] == id), "{rows:?}");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_name_the_fix() {
    let mut w = Hosts::new().await;
    w.sshd.add_host("nobin", &[]);
    w.ssh_host("nobin", None, Some("/nonexistent/cubactl"));
    // `box` is configured but left out of the allowed list.
    w.command_host("older", &other_version(8));
    w.command_host("newer", &other_version(99));
    w.command_host("nothing", &["/nonexistent/bridge".into()]);
    let c = w
        .shim(
            "agent",
            &[("CUBA_EXEC_ALLOWED_HOSTS", "nobin,older,newer,nothing,down")],
        )
        .await;
    let run = |host: &'static str| {
        let c = &c;
        async move {
            let r = c
                .call("run", json!({ "command": "echo x", "host": host }))
                .await;
            assert!(r.is_error(), "{host}: {}", r.text());
            r.text().to_string()
        }
    };
    let t = run("nosuch").await;
    assert!(
        t.contains("unknown host \"nosuch\"") && t.contains("list_hosts"),
        "{t}"
    );
    let t = run("box").await;
    assert!(t.contains("not allowed by policy"), "{t}");
    let t = run("nobin").await;
    assert!(
        t.contains("/nonexistent/cubactl` is not installed there") && t.contains("remote_bin"),
        "{t}"
    );
    let t = run("older").await;
    assert!(
        t.contains("protocol version 8") && t.contains("upgrade cuba-exec on older"),
        "{t}"
    );
    let t = run("newer").await;
    assert!(t.contains("upgrade cuba-exec on this machine"), "{t}");
    let t = run("nothing").await;
    assert!(t.contains("`/nonexistent/bridge` was not found"), "{t}");
    let t = run("down").await;
    assert!(t.contains("Connection refused"), "{t}");
    // This machine still works.
    let r = c.call("run", json!({ "command": "echo fine" })).await;
    assert_eq!(r.output(), "fine\n", "{}", r.text());
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_ssh_the_error_says_to_install_it() {
    let mut w = Hosts::new().await;
    let c = w.shim("agent", &[("PATH", "/nonexistent")]).await;
    let r = c.call("list_hosts", json!({})).await;
    let hosts = r.sc()["hosts"].as_array().expect("hosts").clone();
    let error = hosts[1]["error"].as_str().unwrap_or("");
    assert!(
        error.contains("`ssh` is not installed here"),
        "{}",
        r.text()
    );
    c.close().await;
}
