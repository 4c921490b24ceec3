//! Strategies for the messages of the event log: its requests, events and batches.

use cuba_protocol::*;
use proptest::collection::vec;
use proptest::option::of as opt;
use proptest::prelude::*;

use super::{asks::ask_kind, proc_state, signal, text};

fn kind() -> impl Strategy<Value = EventKind> {
    prop_oneof![
        (text(), opt(text())).prop_map(|(command, name)| EventKind::Started { command, name }),
        (proc_state(), opt(any::<i32>()), opt(signal())).prop_map(|(state, exit_code, signal)| {
            EventKind::Exited {
                state,
                exit_code,
                signal,
            }
        }),
        text().prop_map(|prompt| EventKind::WaitingInput { prompt }),
        (text(), text()).prop_map(|(pattern, line)| EventKind::Matched { pattern, line }),
        any::<u16>().prop_map(|port| EventKind::PortOpened { port }),
        (text(), text()).prop_map(|(limit, detail)| EventKind::LimitHit { limit, detail }),
        (any::<u64>(), ask_kind(), text()).prop_map(|(ask, kind, what)| EventKind::AskRaised {
            ask,
            kind,
            what
        }),
        (any::<u64>(), any::<bool>(), text())
            .prop_map(|(ask, approved, by)| EventKind::AskAnswered { ask, approved, by }),
    ]
}

fn event() -> impl Strategy<Value = Event> {
    (any::<u64>(), any::<u64>(), opt(any::<u64>()), kind()).prop_map(|(seq, at_ms, id, kind)| {
        Event {
            seq,
            at_ms,
            id,
            kind,
        }
    })
}

/// The requests of the event log.
pub fn request() -> BoxedStrategy<Request> {
    prop_oneof![
        (
            opt(any::<u64>()),
            any::<bool>(),
            opt(any::<u64>()),
            any::<u32>()
        )
            .prop_map(|(since, follow, id, max)| Request::Events(EventsRequest {
                since,
                follow,
                id,
                max
            })),
        (any::<u64>(), text())
            .prop_map(|(id, pattern)| Request::Notify(NotifyRequest { id, pattern })),
    ]
    .boxed()
}

/// The responses of the event log.
pub fn response() -> BoxedStrategy<Response> {
    (vec(event(), 0..3), any::<u64>(), any::<u64>())
        .prop_map(|(events, next, lost)| Response::Events(EventBatch { events, next, lost }))
        .boxed()
}
