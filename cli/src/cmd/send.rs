//! `send ID [TEXT] [--key NAME]…`: write to a process's stdin — a line, keys such as Enter or
//! C-c for a program on a terminal — or close it with `--eof`.

use std::io::Read;
use std::process::ExitCode;

use anyhow::{Context, Result};
use cuba_protocol::{keys, RequestToken, StdinRequest};

use crate::ctx::Ctx;
use crate::target::Target;

#[derive(clap::Args, Debug)]
#[command(after_help = after_help())]
pub struct Args {
    /// The process: its id (first column of `cubactl ps`) or its name.
    #[arg(value_name = "ID|NAME")]
    process: Target,
    /// What to write; a newline is added (as if typed and Enter pressed; on a terminal, the
    /// Enter key) unless --key is given or -n. `-` sends this command's own stdin as is.
    #[arg(required_unless_present_any = ["eof", "keys"])]
    text: Option<String>,
    /// A key to send after the text (repeatable, sent in order): Enter, Tab, Esc, Up, C-c,
    /// C-d, M-x, F1 … (the list is below).
    #[arg(long = "key", short = 'k', value_name = "NAME", value_parser = parse_key)]
    keys: Vec<Key>,
    /// Do not add the newline.
    #[arg(short = 'n', long)]
    no_newline: bool,
    /// Close the process's stdin afterwards (it reads EOF; on a terminal, C-d is sent).
    #[arg(long)]
    eof: bool,
}

fn after_help() -> String {
    format!(
        "Keys (case does not matter): {}. On a terminal (a process started with --tty), C-c, \
         C-z and C-d act as typed there: interrupt, suspend, end of input.\n\n\
         Examples:\n  \
         cubactl send 3 yes                         the line `yes` and a newline\n  \
         cubactl send 3 'print(6*7)' --key Enter    text as typed, then Enter\n  \
         cubactl send 3 --key C-c                   interrupt what runs on its terminal\n  \
         cubactl send 3 --key Down --key Enter      pick the next entry of a menu",
        keys::KEY_NAMES
    )
}

/// A named key and the bytes a terminal sends for it.
#[derive(Clone, Debug)]
struct Key(Vec<u8>);

fn parse_key(name: &str) -> Result<Key, String> {
    keys::key_bytes(name)
        .map(Key)
        .ok_or_else(|| format!("unknown key; known keys: {}", keys::KEY_NAMES))
}

pub async fn run(ctx: &Ctx, args: Args) -> Result<ExitCode> {
    let mut data = match args.text.as_deref() {
        Some("-") => {
            let mut all = Vec::new();
            std::io::stdin()
                .read_to_end(&mut all)
                .context("cannot read stdin")?;
            all
        }
        Some(text) => text.as_bytes().to_vec(),
        None => Vec::new(),
    };
    let client = ctx.connect().await?;
    let id = args.process.resolve(&client).await?;
    let newline =
        args.text.as_deref().is_some_and(|t| t != "-") && args.keys.is_empty() && !args.no_newline;
    if newline {
        // What pressing Enter sends: `\r` on a terminal (programs in raw mode wait for that
        // one; the terminal turns it into `\n` for the others), `\n` into a pipe.
        let tty = client.info(id).await?.tty.is_some();
        data.push(if tty { b'\r' } else { b'\n' });
    }
    for key in &args.keys {
        data.extend_from_slice(&key.0);
    }
    // One token for every attempt: written once even if the connection drops and it is sent
    // again.
    let req = StdinRequest {
        id,
        data,
        eof: args.eof,
        token: Some(RequestToken::fresh()),
    };
    ctx.once(|c| {
        let req = req.clone();
        async move { c.write_stdin(req).await }
    })
    .await?;
    Ok(ExitCode::SUCCESS)
}
