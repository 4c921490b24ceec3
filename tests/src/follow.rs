//! Following a process's output the way a client that survives daemon upgrades does: from a
//! cursor, connecting again after every lost connection from the cursor of the last byte seen,
//! and checking that each read starts exactly there (no gap, no byte twice).

use cuba_protocol::client::{this_client, Client};
use cuba_protocol::{ClientKind, FollowRequest, OutputRead, Request, Response, StreamFilter};

use crate::TestDaemon;

/// Follows process `id` from cursor 0 to its end, across lost connections; `each` gets every
/// read. Panics on a gap, an overlap or a dropped byte.
pub async fn follow_across(d: &TestDaemon, id: u64, mut each: impl FnMut(&OutputRead)) {
    let mut since = 0;
    loop {
        let me = this_client(ClientKind::Other, "follower");
        let Ok(c) = Client::connect(d.socket(), me).await else {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            continue;
        };
        let req = Request::Follow(FollowRequest {
            id,
            since: Some(since),
            backlog: 0,
            stream: StreamFilter::Both,
        });
        let Ok(mut frames) = c.subscribe(req).await else {
            continue;
        };
        loop {
            match frames.next().await {
                None => return,
                Some(Ok(Response::Output(read))) => {
                    assert_eq!(read.dropped, 0, "bytes dropped: {read:?}");
                    assert_eq!(read.start, since, "a gap or overlap at {since}");
                    each(&read);
                    since = read.next;
                }
                Some(Ok(_)) => {}
                Some(Err(e)) if e.connection_lost() => break,
                Some(Err(e)) => panic!("follow failed: {e}"),
            }
        }
    }
}
