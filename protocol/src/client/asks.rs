//! The questions put to a person: approving, denying, listing and forgetting; a password asked
//! for and given.

use super::stream::unexpected;
use super::{Client, ClientError};
use crate::message::*;

impl Client {
    /// A person approves process `id`'s pending ask (`ask`: which one, where it has several);
    /// `always`: remembered for `dir` (default: the ask's directory). The record after.
    pub async fn approve(&self, req: ApproveRequest) -> Result<ProcessInfo, ClientError> {
        match self.call(Request::Approve(req)).await? {
            Response::Process(p) => Ok(p),
            other => Err(unexpected(other)),
        }
    }

    /// A person denies process `id`'s pending ask, with a reason the model is told.
    pub async fn deny(&self, req: DenyRequest) -> Result<ProcessInfo, ClientError> {
        match self.call(Request::Deny(req)).await? {
            Response::Process(p) => Ok(p),
            other => Err(unexpected(other)),
        }
    }

    /// Every pending ask and remembered approval.
    pub async fn approvals(&self) -> Result<Approvals, ClientError> {
        match self.call(Request::Approvals).await? {
            Response::Approvals(a) => Ok(a),
            other => Err(unexpected(other)),
        }
    }

    /// Forgets remembered approvals; what is left.
    pub async fn forget(&self, req: ForgetRequest) -> Result<Approvals, ClientError> {
        match self.call(Request::Forget(req)).await? {
            Response::Approvals(a) => Ok(a),
            other => Err(unexpected(other)),
        }
    }

    /// From inside a process's tree (the askpass helper): asks the person for a password.
    pub async fn ask_secret(&self, prompt: String) -> Result<Secret, ClientError> {
        match self.call(Request::AskSecret(SecretAsk { prompt })).await? {
            Response::Secret(s) => Ok(s),
            other => Err(unexpected(other)),
        }
    }

    /// A person's answer to a password question (`None`: refuses to give one).
    pub async fn answer_secret(&self, req: SecretAnswer) -> Result<(), ClientError> {
        match self.call(Request::AnswerSecret(req)).await? {
            Response::Ok => Ok(()),
            other => Err(unexpected(other)),
        }
    }
}
