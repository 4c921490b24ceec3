//! `cuba-askpass`: the askpass helper cubad gives every command (`SUDO_ASKPASS`, `SSH_ASKPASS`,
//! `GIT_ASKPASS`). A program that needs a password runs it with its prompt; it asks the person
//! through the daemon (who answers with `cubactl answer ID`, seen by nobody else) and prints the
//! password for the program on stdout. The agent's model never sees it.
//!
//! Exit status: 0 with the password on stdout; 1 when none was given (refused, timed out, the
//! daemon cannot be reached), the reason on stderr.

use std::io::Write;
use std::process::ExitCode;

use cuba_protocol::client::{this_client, Client};
use cuba_protocol::{ClientKind, Secret};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let prompt = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "Password:".to_string());
    if matches!(prompt.as_str(), "--help" | "-h") {
        println!(
            "cuba-askpass: asks the person for a password through cubad (answered with \
             `cubactl answer ID`). Run by programs, not by hand."
        );
        return ExitCode::SUCCESS;
    }
    let Some(socket) = std::env::var_os("CUBA_EXEC_ASKPASS_SOCKET") else {
        eprintln!("cuba-askpass: CUBA_EXEC_ASKPASS_SOCKET is not set: run only under cubad");
        return ExitCode::FAILURE;
    };
    let client = match Client::connect(
        socket.as_ref(),
        this_client(ClientKind::Other, "cuba-askpass"),
    )
    .await
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cuba-askpass: cannot reach cubad: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Only now: the daemon judged this process by its `/proc` entries (its program, tracer and
    // environment) before it answered the handshake; from here on they are root's, and no
    // other process of the user may trace it or read the password it is about to get.
    cuba_protocol::private::keep_to_itself();
    match client.ask_secret(prompt).await {
        Ok(Secret::Given(secret)) => {
            let mut out = std::io::stdout().lock();
            let written = out
                .write_all(&secret)
                .and_then(|()| out.write_all(b"\n"))
                .and_then(|()| out.flush());
            match written {
                Ok(()) => ExitCode::SUCCESS,
                Err(_) => ExitCode::FAILURE,
            }
        }
        Ok(Secret::Refused(why)) => {
            eprintln!("cuba-askpass: no password: {why}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("cuba-askpass: {e}");
            ExitCode::FAILURE
        }
    }
}
