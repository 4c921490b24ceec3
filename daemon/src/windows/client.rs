//! Who is on the other end of a connection, and how a request's reply frames reach it.

use cuba_protocol::{ClientInfo, Owner, Response, ResponseFrame};
use tokio::sync::mpsc;

use crate::policy::Effective;

/// Who is on the other end, and the policy it is held to.
pub struct Client {
    pub info: ClientInfo,
    pub policy: Effective,
}

impl Client {
    pub fn owner(&self) -> Owner {
        Owner {
            kind: self.info.kind,
            name: self.info.name.clone(),
            pid: self.info.pid,
        }
    }
}

/// Sends the frames of one request's reply.
#[derive(Clone)]
pub struct Responder {
    pub id: u64,
    tx: mpsc::Sender<ResponseFrame>,
}

impl Responder {
    pub fn new(id: u64, tx: mpsc::Sender<ResponseFrame>) -> Responder {
        Responder { id, tx }
    }

    /// False once the connection is gone.
    pub async fn send(&self, response: Response) -> bool {
        let frame = ResponseFrame {
            id: self.id,
            response,
        };
        self.tx.send(frame).await.is_ok()
    }
}
