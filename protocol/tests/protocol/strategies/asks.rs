//! Strategies for the messages of `ask` decisions: questions, answers, remembered approvals.

use cuba_protocol::*;
use proptest::collection::vec;
use proptest::option::of as opt;
use proptest::prelude::*;

use super::{bytes, text};

pub(super) fn ask_kind() -> impl Strategy<Value = AskKind> {
    prop_oneof![
        Just(AskKind::Command),
        Just(AskKind::Exec),
        Just(AskKind::Network),
        Just(AskKind::Password)
    ]
}

pub fn ask() -> impl Strategy<Value = Ask> {
    (
        any::<u64>(),
        ask_kind(),
        (text(), text(), any::<u32>(), text()),
        (any::<u64>(), any::<u64>()),
    )
        .prop_map(
            |(id, kind, (what, rule, pid, cwd), (asked_at_ms, deadline_ms))| Ask {
                id,
                kind,
                what,
                rule,
                pid,
                cwd,
                asked_at_ms,
                deadline_ms,
            },
        )
}

fn remembered() -> impl Strategy<Value = Remembered> {
    (text(), opt(text()), text(), text(), any::<u64>()).prop_map(
        |(rule, dir, by, channel, at_ms)| Remembered {
            rule,
            dir,
            by,
            channel,
            at_ms,
        },
    )
}

pub fn approvals() -> impl Strategy<Value = Approvals> {
    let pending =
        (any::<u64>(), text(), text(), ask()).prop_map(|(id, owner, command, ask)| Pending {
            id,
            owner,
            command,
            ask,
        });
    (
        vec(pending, 0..3),
        vec(remembered(), 0..3),
        text(),
        vec(text(), 0..2),
    )
        .prop_map(|(pending, remembered, file, unconfirmed)| Approvals {
            pending,
            remembered,
            file,
            unconfirmed,
        })
}

/// The requests of the person's part.
pub fn request() -> BoxedStrategy<Request> {
    let id = any::<u64>;
    prop_oneof![
        (id(), opt(id()), any::<bool>(), opt(text())).prop_map(|(id, ask, always, dir)| {
            Request::Approve(ApproveRequest {
                id,
                ask,
                always,
                dir,
            })
        }),
        (id(), opt(id()), opt(text())).prop_map(|(id, ask, reason)| Request::Deny(DenyRequest {
            id,
            ask,
            reason
        })),
        Just(Request::Approvals),
        prop_oneof![
            any::<u32>().prop_map(ForgetRequest::Index),
            text().prop_map(ForgetRequest::Rule),
            Just(ForgetRequest::All),
        ]
        .prop_map(Request::Forget),
        text().prop_map(|prompt| Request::AskSecret(SecretAsk { prompt })),
        (id(), opt(id()), opt(bytes())).prop_map(|(id, ask, secret)| {
            Request::AnswerSecret(SecretAnswer { id, ask, secret })
        }),
        Just(Request::Reload),
        (
            text(),
            opt(vec(text(), 0..2)),
            opt(vec(text(), 0..2)),
            opt(vec(text(), 0..2)),
            opt(any::<u64>()),
            any::<bool>()
        )
            .prop_map(|(name, hosts, allow, roots, expires_in, replace)| {
                Request::TokenCreate(TokenCreate {
                    name,
                    hosts,
                    allow,
                    roots,
                    expires_in,
                    replace,
                    budget: None,
                })
            }),
        text().prop_map(Request::TokenRevoke),
        Just(Request::TokenList),
        text().prop_map(Request::TokenCheck),
        any::<u32>().prop_map(Request::HttpStop),
        Just(Request::Authorize(Verb::HttpStart)),
    ]
    .boxed()
}

fn token_info() -> impl Strategy<Value = TokenInfo> {
    (
        text(),
        any::<u64>(),
        opt(any::<u64>()),
        opt(vec(text(), 0..2)),
        opt(vec(text(), 0..2)),
        opt(vec(text(), 0..2)),
    )
        .prop_map(|(name, created, expires, hosts, allow, roots)| TokenInfo {
            name,
            created,
            expires,
            hosts,
            allow,
            roots,
            budget: Some(Budget {
                cpu_millis: Some(250),
                memory: Some(1 << 20),
                pids: None,
            }),
        })
}

fn changes() -> impl Strategy<Value = Changes> {
    vec(text(), 0..3).prop_map(|lines| Changes { lines })
}

/// The responses of the person's part.
pub fn response() -> BoxedStrategy<Response> {
    prop_oneof![
        approvals().prop_map(Response::Approvals),
        prop_oneof![
            bytes().prop_map(Secret::Given),
            text().prop_map(Secret::Refused)
        ]
        .prop_map(Response::Secret),
        changes().prop_map(Response::Reloaded),
        (text(), token_info(), text())
            .prop_map(|(token, info, file)| Response::TokenMade(TokenMade { token, info, file })),
        (vec(token_info(), 0..3), text(), vec(text(), 0..2)).prop_map(
            |(tokens, file, unconfirmed)| Response::Tokens(TokenList {
                tokens,
                file,
                unconfirmed
            })
        ),
        prop_oneof![
            token_info().prop_map(TokenVerdict::Valid),
            Just(TokenVerdict::Unknown),
            Just(TokenVerdict::Expired),
        ]
        .prop_map(Response::Token),
        changes().prop_map(Response::Upgrading),
    ]
    .boxed()
}
