//! The idle limit of a connection: a timer that costs a request only a clock read, and the
//! notice the client gets before an idle connection is closed.

use std::pin::Pin;
use std::time::Duration;

use cuba_protocol::{Response, ResponseFrame};
use tokio::time::{Instant, Sleep};

/// When a connection counts as idle. The timer is armed once and moved on only when it fires
/// early (something happened since), never per request.
pub struct Idle {
    /// `None`: a timeout too long to reach.
    timeout: Option<Duration>,
    last: Instant,
    timer: Pin<Box<Sleep>>,
}

impl Idle {
    pub fn new(timeout: Duration) -> Idle {
        let now = Instant::now();
        let at = now.checked_add(timeout);
        Idle {
            timeout: at.map(|_| timeout),
            last: now,
            timer: Box::pin(tokio::time::sleep_until(at.unwrap_or(now))),
        }
    }

    /// Something happened on the connection (a frame read, a request finished).
    pub fn touch(&mut self) {
        self.last = Instant::now();
    }

    /// Waits for the timer: true when the connection has been idle for the whole timeout
    /// (as far as the caller counts it: it polls this only while nothing is in flight), false
    /// when something happened meanwhile (the timer is moved on). Cancel-safe.
    pub async fn expired(&mut self) -> bool {
        let Some(timeout) = self.timeout else {
            return std::future::pending().await;
        };
        self.timer.as_mut().await;
        let due = self.last + timeout;
        if Instant::now() >= due {
            return true;
        }
        self.timer.as_mut().reset(due);
        false
    }
}

/// The connection-level notice (id 0) sent before an idle connection is closed.
pub fn notice(timeout: Duration) -> ResponseFrame {
    let reason = format!(
        "cubad closes this connection: nothing was asked of it for {} \
         (CUBA_EXEC_IDLE_TIMEOUT); every request it read was answered, so connect again to \
         send more",
        crate::base::config::shown_duration(timeout)
    );
    ResponseFrame {
        id: 0,
        response: Response::Closing { reason },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unreachable_timeout_is_no_timeout() {
        assert!(Idle::new(Duration::MAX).timeout.is_none());
        assert!(Idle::new(Duration::from_secs(600)).timeout.is_some());
    }
}
