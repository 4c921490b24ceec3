//! The accept loop: one pipe instance waits for a client; once one connects, it is served and
//! the next instance is created.

use std::sync::Arc;

use cuba_protocol::win;
use tokio::net::windows::named_pipe::NamedPipeServer;

use super::Daemon;

/// Serves until the daemon is told to stop.
pub async fn serve(d: Arc<Daemon>, first: NamedPipeServer) {
    let mut stop = d.stop.subscribe();
    let mut waiting = first;
    loop {
        tokio::select! {
            connected = waiting.connect() => {
                if let Err(e) = connected {
                    tracing::warn!("pipe client lost before it was served: {e}");
                }
            }
            _ = stop.wait_for(|s| *s) => return,
        }
        serve_one(&d, waiting);
        // A client that comes meanwhile finds the name busy and retries (`win::open_pipe`).
        waiting = loop {
            match win::pipe_server(&d.config.socket, false) {
                Ok(next) => break next,
                Err(e) => {
                    tracing::error!("cannot create the next pipe instance: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        };
    }
}

fn serve_one(d: &Arc<Daemon>, pipe: NamedPipeServer) {
    // The pipe's descriptor lets only this user in; the daemon checks the client's token user
    // all the same, as the peer-uid check does on Unix.
    let peer = match win::check_client(&pipe) {
        Ok(pid) => pid,
        Err(e) => {
            tracing::warn!("pipe client refused: {e}");
            return;
        }
    };
    tokio::spawn(super::conn::serve(d.clone(), pipe, peer));
}
