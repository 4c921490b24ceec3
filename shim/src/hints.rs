//! The line of a reply that tells the model what to call next, for a process that is still
//! running, waiting for input, just started, or was just sent input.

use cuba_protocol::{Ask, AskKind, ProcKind, ProcState, ProcessInfo};

/// The hint for a reply about `info`: `prompt` finds what it asks when it waits for input (the
/// end of its output, or its screen); `next` is the reply's cursor. `None` once it has ended.
pub fn for_state(
    info: &ProcessInfo,
    next: u64,
    prompt: impl FnOnce() -> Option<String>,
) -> Option<String> {
    if info.state == ProcState::AwaitingApproval {
        Some(awaiting(info, None))
    } else if let Some(ask) = info.asks.iter().find(|a| a.kind == AskKind::Password) {
        Some(password(info, ask))
    } else if info.state == ProcState::WaitingInput {
        Some(waiting(info, prompt()))
    } else if !info.state.is_finished() {
        Some(running(info.id, next, info.tty.is_some()))
    } else {
        None
    }
}

/// A process held until a person answers (`note`: why the client did not ask them itself).
pub fn awaiting(info: &ProcessInfo, note: Option<&str>) -> String {
    let id = info.id;
    let what = info
        .asks
        .iter()
        .find(|a| a.kind.holds())
        .map_or(String::new(), |a| format!(" of `{}` ({})", a.what, a.rule));
    let note = note.map_or(String::new(), |n| format!(" ({n})"));
    format!(
        "awaiting the user's approval{what}: they answer in their terminal (cubactl approve \
         {id} / cubactl deny {id}){note}; do not try another way around it. wait(id={id}) \
         returns once they have (it runs if approved)"
    )
}

/// sudo ended for want of a terminal to ask its password on: `-A` asks the user through
/// cubactl instead (the askpass helper every command gets).
pub fn sudo(output: &str) -> Option<String> {
    let wanted = output.contains("sudo: a terminal is required")
        || output.contains("sudo: a password is required");
    wanted.then(|| {
        "sudo needs the user's password and has no terminal to ask it on: run it as `sudo -A \
         …`, and the user is asked for it in their terminal (cubactl answer); never ask them \
         for a password in the chat"
            .to_string()
    })
}

/// A program of process `info` waits for the user's password, asked through cubactl.
pub fn password(info: &ProcessInfo, ask: &Ask) -> String {
    let id = info.id;
    format!(
        "waiting for the user's password ({} asks: {:?}), asked through cubactl: they answer \
         with `cubactl answer {id}` in their terminal; never send a password yourself. \
         wait(id={id}) returns once they have",
        ask.rule, ask.what
    )
}

pub fn running(id: u64, next: u64, tty: bool) -> String {
    let screen = match tty {
        true => format!("; status(id={id}, view=\"screen\") shows its screen"),
        false => String::new(),
    };
    format!(
        "still running in the background: wait(id={id}, since={next}) for more output or its \
         exit; send_input(id={id}) answers a prompt; send_signal(id={id}) stops it{screen}"
    )
}

/// What to call for process `info`, waiting for input after `prompt`.
pub fn waiting(info: &ProcessInfo, prompt: Option<String>) -> String {
    let id = info.id;
    // A program that asks for a secret itself rather than through the askpass helper: the user
    // types it, never the model.
    if prompt.as_deref().is_some_and(asks_a_secret) {
        return format!(
            "waiting for a password after {:?}: never send one yourself; the user types it with \
             `cubactl attach {id}` in their terminal (sudo -A, ssh and git ask them through \
             cubactl by themselves). wait(id={id}) returns once they have",
            prompt.unwrap_or_default()
        );
    }
    let after = prompt.map_or(String::new(), |p| format!(" after {p:?}"));
    if info.tty.is_some() {
        // On a terminal, Enter is a key and end of input is C-d, as for a person.
        format!(
            "waiting for input{after}: send_input(id={id}, text=\"...\", keys=[\"Enter\"]) \
             answers it, keys=[\"C-d\"] ends input, keys=[\"C-c\"] interrupts; \
             status(id={id}, view=\"screen\") shows the screen"
        )
    } else if info.kind == ProcKind::InSession {
        // Its stdin is the session shell's: closing it would end the session.
        format!(
            "waiting for input{after}: send_input(id={id}, text=\"...\\n\") answers it; \
             send_signal(id={id}, signal=\"SIGINT\") interrupts it and keeps the session"
        )
    } else {
        format!(
            "waiting for input{after}: send_input(id={id}, text=\"...\\n\") answers it, \
             send_input(id={id}, eof=true) closes stdin; send_signal(id={id}) stops it"
        )
    }
}

/// Whether a prompt asks for a secret: a password, a passphrase, a PIN or a token.
fn asks_a_secret(prompt: &str) -> bool {
    let p = prompt.to_lowercase();
    [
        "password",
        "passphrase",
        "passcode",
        "pin:",
        "pin for",
        "token:",
    ]
    .iter()
    .any(|w| p.contains(w))
}

/// A process `start` just started in the background.
pub fn started(info: &ProcessInfo) -> String {
    let id = info.id;
    let screen = match info.tty {
        Some(_) => format!(", status(id={id}, view=\"screen\") to see its screen"),
        None => String::new(),
    };
    format!(
        "started in the background: wait(id={id}, until=\"<text it prints when ready>\") or \
         status(id={id}) to read its output{screen}"
    )
}

/// After `sent` bytes of input (and end of input with `eof`) went to `info`'s process.
pub fn sent(info: &ProcessInfo, sent: usize, eof: bool) -> String {
    let closed = match (eof, info.tty.is_some()) {
        (false, _) => "",
        (true, true) => " and C-d (end of input)",
        (true, false) => " and closed stdin",
    };
    format!(
        "sent {sent} bytes{closed}; wait(id={}, since={}) reads the response",
        info.id,
        info.total_bytes()
    )
}

/// The last line of `output`, the prompt a waiting process printed (shortened).
pub fn prompt(output: &str) -> Option<String> {
    let line = output
        .trim_end_matches(['\n', '\r'])
        .rsplit('\n')
        .next()?
        .trim_end_matches('\r');
    if line.trim().is_empty() {
        return None;
    }
    let count = line.chars().count();
    Some(match count > 200 {
        true => format!("…{}", line.chars().skip(count - 200).collect::<String>()),
        false => line.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_is_the_last_line_shortened() {
        assert_eq!(prompt("a\nName? \n"), Some("Name? ".into()));
        assert_eq!(prompt("a\n\n"), Some("a".into()));
        assert_eq!(prompt("  \n"), None);
        let long = "x".repeat(300);
        let p = prompt(&long).expect("a prompt");
        assert_eq!(p.chars().count(), 201);
        assert!(p.starts_with('…'));
    }

    #[test]
    fn sudo_without_a_terminal_is_pointed_at_dash_a() {
        let said = "sudo: a terminal is required to read the password; either use the -S option \
                    to read from standard input or configure an askpass helper\nsudo: a password \
                    is required\n";
        let hint = sudo(said).expect("a hint");
        assert!(
            hint.contains("sudo -A") && hint.contains("cubactl answer"),
            "{hint}"
        );
        assert_eq!(sudo("sudo: 1 incorrect password attempt\n"), None);
    }

    #[test]
    fn a_password_prompt_is_left_to_the_user() {
        for p in [
            "Password: ",
            "Enter passphrase for key '/k': ",
            "[sudo] password for me: ",
        ] {
            assert!(asks_a_secret(p), "{p}");
        }
        for p in ["Name? ", "Proceed (y/n)? ", "Spinning up..."] {
            assert!(!asks_a_secret(p), "{p}");
        }
    }
}
