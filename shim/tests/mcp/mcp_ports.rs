//! `start` with `port`: a free port leased to the command, given as `PORT`, said in the reply
//! and in `list_processes`; another agent asking for a port one of ours holds is refused.

use std::net::{Ipv4Addr, TcpStream};

use crate::common;

use common::mcp::in_process;
use common::TestDir;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_with_port_auto_serves_there_and_the_port_is_not_given_twice() {
    let t = TestDir::with_daemon().await;
    let c = in_process(&t.socket(), "agent-one").await;
    let command = "exec python3 -u -m http.server $PORT --bind 127.0.0.1";
    let r = c
        .call("start", json!({ "command": command, "port": "auto" }))
        .await;
    assert!(!r.is_error(), "{}", r.text());
    let port = r.u64("port");
    let header = r.text().lines().next().unwrap_or_default();
    assert!(header.contains(&format!("port:{port}")), "{header}");
    let id = r.id();
    let w = c
        .call(
            "wait",
            json!({ "id": id, "until": "Serving HTTP", "timeout_ms": 20000 }),
        )
        .await;
    assert!(w.output().contains(&format!("port {port}")), "{}", w.text());
    let port = u16::try_from(port).expect("a TCP port");
    TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("the server listens on its port");
    let rows = c.rows(json!({})).await;
    let row = rows.iter().find(|r| r["id"] == id).expect("listed");
    assert_eq!(row["port"], json!(port), "{row}");

    // Another agent, by number or as text: refused, the holder named.
    let other = in_process(&t.socket(), "agent-two").await;
    for asked in [json!(port), json!(port.to_string())] {
        let r = other
            .call("start", json!({ "command": "true", "port": asked }))
            .await;
        assert!(r.is_error(), "port {asked} leased twice: {}", r.text());
        assert!(
            r.text().contains(&format!("leased to process {id}")),
            "{}",
            r.text()
        );
    }
    for bad in [json!(0), json!("soon"), json!(70000)] {
        let r = other
            .call("start", json!({ "command": "true", "port": bad }))
            .await;
        assert!(
            r.is_error() && r.text().contains("auto"),
            "{bad}: {}",
            r.text()
        );
    }
    other.close().await;
    c.close().await;
}
