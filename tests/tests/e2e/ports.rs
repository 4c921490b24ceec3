//! Ports leased to processes (`SpawnRequest::port`, `cubactl start --port`) and `cubactl
//! ports`: real servers on 127.0.0.1, real sockets held by the test itself as a process that
//! is not the daemon's.

use std::net::{Ipv4Addr, TcpListener, TcpStream};

use cuba_protocol::client::Client;
use cuba_protocol::{PortWish, ProcessInfo, SpawnRequest};
use cuba_tests::{spawn_req, spawn_with, wait_for, wait_match, TestDaemon, STEP};

/// A server on `$PORT` (unbuffered, so its banner is a line as soon as it listens).
const SERVER: &str = "exec python3 -u -m http.server $PORT --bind 127.0.0.1";

fn with_port(command: &str, port: PortWish) -> SpawnRequest {
    SpawnRequest {
        port: Some(port),
        ..spawn_req(command)
    }
}

/// Starts the server with `port: auto`, waits until it serves, and returns its row and port.
async fn server(c: &Client) -> (ProcessInfo, u16) {
    let p = spawn_with(c, with_port(SERVER, PortWish::Auto)).await;
    let port = p.port.expect("a port was leased");
    let line = wait_match(c, p.id, "Serving HTTP").await;
    assert!(line.contains(&format!("port {port}")), "{line}");
    TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("the server listens on its port");
    (p, port)
}

/// Whether the port can be bound again (nobody listens on it).
fn free(port: u16) -> bool {
    TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_ports_differ_are_listed_with_their_owner_and_freed_by_a_kill() {
    let d = TestDaemon::start().await;
    let a = d.client_named("agent-a").await;
    let b = d.client_named("agent-b").await;
    let ((first, p1), (second, p2)) = (server(&a).await, server(&b).await);
    assert_ne!(p1, p2, "two leases of one port");

    // The person's view: every owner's ports, one row each.
    let (ok, out, err) = d.ctl(&["ports"]).await;
    assert!(ok, "{err}");
    for (p, port, owner) in [(&first, p1, "agent-a"), (&second, p2, "agent-b")] {
        let row = out
            .lines()
            .find(|l| l.trim_start().starts_with(&port.to_string()))
            .unwrap_or_else(|| panic!("no row of port {port}:\n{out}"));
        assert!(row.contains(&format!("127.0.0.1:{port}")), "{row}");
        assert!(
            row.contains(owner) && row.contains(&p.id.to_string()),
            "{row}"
        );
    }
    let (ok, out, _) = d.ctl(&["ports", "--json"]).await;
    let rows: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert!(ok && rows.as_array().is_some_and(|r| r.len() >= 2), "{out}");
    let (_, ps, _) = d.ctl(&["ps"]).await;
    assert!(ps.contains(&p1.to_string()), "{ps}");

    // Who holds p1, then stop it: the port is free again and no one of ours holds it.
    let (ok, out, err) = d.ctl(&["ports", &p1.to_string()]).await;
    assert!(
        ok && out.contains("agent-a") && !out.contains("agent-b"),
        "{out}{err}"
    );
    let (ok, out, err) = d.ctl(&["ports", &p1.to_string(), "--kill"]).await;
    assert!(ok, "{out}{err}");
    assert!(wait_for(|| free(p1), STEP).await, "port {p1} still held");
    let (ok, _, err) = d.ctl(&["ports", &p1.to_string()]).await;
    assert!(!ok && err.contains(&format!("port {p1}")), "{err}");

    // A third lease after the first ended: a free port, served.
    let (_, p3) = server(&a).await;
    assert_ne!(p3, p2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_or_a_listener_of_ours_is_not_handed_out_again() {
    let d = TestDaemon::start().await;
    let a = d.client_named("agent-a").await;
    let b = d.client_named("agent-b").await;
    // Leased, nothing listening yet: still not another's.
    let quiet = spawn_with(&a, with_port("sleep 60", PortWish::Auto)).await;
    let held = quiet.port.expect("a port");
    let refused = b
        .spawn(with_port("true", PortWish::Exact(held)))
        .await
        .expect_err("a leased port given twice");
    let said = refused.to_string();
    assert!(
        said.contains(&format!("leased to process {}", quiet.id)),
        "{said}"
    );
    assert!(said.contains("agent-a"), "{said}");
    let (_, ps, _) = d.ctl(&["ps"]).await;
    assert!(ps.contains(&format!("{held}(lease)")), "{ps}");
    let (ok, out, _) = d.ctl(&["ports", &held.to_string()]).await;
    assert!(ok && out.contains("not listening yet"), "{out}");

    // Listened on by one of ours without a lease: refused, naming it (cubactl too).
    let spare = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
    let port = spare.local_addr().expect("addr").port();
    drop(spare);
    let plain = format!("exec python3 -u -m http.server {port} --bind 127.0.0.1");
    let web = spawn_with(&a, spawn_req(&plain)).await;
    wait_match(&a, web.id, "Serving HTTP").await;
    let (ok, _, err) = d
        .ctl(&["start", "--port", &port.to_string(), "--", "true"])
        .await;
    assert!(!ok, "started on a port in use");
    assert!(
        err.contains(&format!("in use by process {}", web.id)),
        "{err}"
    );

    // From inside a tree, as an agent's command would try it: the same refusal.
    let ctl = cuba_tests::bin("cubactl");
    let inside = format!(
        "'{}' --socket '{}' start --port {held} -- true 2>&1; echo rc=$?",
        ctl.display(),
        d.socket().display()
    );
    let (_, out) = cuba_tests::run_in(&b, &inside, d.dir()).await;
    assert!(
        out.contains("leased to process") && out.contains("rc=1"),
        "{out}"
    );

    // A free exact port is leased and given as PORT.
    let spare = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
    let want = spare.local_addr().expect("addr").port();
    drop(spare);
    let p = spawn_with(&b, with_port("echo port=$PORT", PortWish::Exact(want))).await;
    assert_eq!(p.port, Some(want));
    wait_match(&b, p.id, &format!("^port={want}$")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_held_by_a_process_not_ours_is_said_to_be() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let mine = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
    let port = mine.local_addr().expect("addr").port();
    let (ok, _, err) = d.ctl(&["ports", &port.to_string()]).await;
    assert!(!ok, "a port of the test's own listed as the daemon's");
    let me = format!("pid {}", std::process::id());
    assert!(
        err.contains("not a process of the daemon's") && err.contains(&me),
        "{err}"
    );
    let said = c
        .spawn(with_port("true", PortWish::Exact(port)))
        .await
        .expect_err("a port in use leased")
        .to_string();
    assert!(
        said.contains(&me) && said.contains("not one of ours"),
        "{said}"
    );
    drop(mine);
    let (ok, _, err) = d.ctl(&["ports", &port.to_string()]).await;
    assert!(!ok && err.contains("no process listens"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_outlives_an_upgrade_in_place_and_ends_with_its_process() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let p = spawn_with(&c, with_port("sleep 60", PortWish::Auto)).await;
    let port = p.port.expect("a port");
    let (ok, out, err) = d.ctl(&["daemon", "upgrade"]).await;
    assert!(ok, "upgrade failed: {out}{err}");
    let c = d.client().await;
    let again = c
        .spawn(with_port("true", PortWish::Exact(port)))
        .await
        .expect_err("the lease was lost in the hand-over")
        .to_string();
    assert!(
        again.contains(&format!("leased to process {}", p.id)),
        "{again}"
    );
    let (ok, _, err) = d.ctl(&["kill", &p.id.to_string()]).await;
    assert!(ok, "{err}");
    let q = spawn_with(&c, with_port("true", PortWish::Exact(port))).await;
    assert_eq!(q.port, Some(port), "the ended process's lease was kept");
}
