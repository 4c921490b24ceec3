//! `man`: the manual page in roff, generated from the clap definition.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Write cubactl.1 and one page per subcommand (cubactl-ps.1, …) into this directory
    /// instead of printing the main page.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let cmd = crate::cli_command();
    match args.dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(cmd, &dir)
                .with_context(|| format!("cannot write pages into {}", dir.display()))?;
            outln!("wrote manual pages into {}", dir.display())?;
        }
        None => clap_mangen::Man::new(cmd).render(&mut std::io::stdout())?,
    }
    Ok(ExitCode::SUCCESS)
}
