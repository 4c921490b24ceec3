//! `completions SHELL`: a completion script generated from the clap definition.

use std::process::ExitCode;

use anyhow::Result;
use clap_complete::Shell;

#[derive(clap::Args, Debug)]
#[command(after_help = "\
Install, for example:
  bash: cubactl completions bash > ~/.local/share/bash-completion/completions/cubactl
  zsh:  cubactl completions zsh > ~/.zfunc/_cubactl   (with ~/.zfunc in $fpath)
  fish: cubactl completions fish > ~/.config/fish/completions/cubactl.fish")]
pub struct Args {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: Shell,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let mut cmd = crate::cli_command();
    clap_complete::generate(args.shell, &mut cmd, "cubactl", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}
