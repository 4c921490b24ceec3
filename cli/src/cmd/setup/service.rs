//! `setup --http`: the HTTP endpoint as a service the system keeps running — a systemd user
//! unit on Linux, a launchd agent on macOS — written (or shown, `--dry-run`; taken out,
//! `--remove`), then the one command that starts it is printed: enabling a service is the
//! person's step, as a client restart is for the client entries.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Result};

use super::clients::Dirs;
use super::files;

/// The unit's name.
const UNIT: &str = "cuba-exec-http";
const LAUNCHD_LABEL: &str = "dev.cuba-exec.http";

/// Where the unit goes on this system, and what starts it.
fn place(dirs: &Dirs) -> Result<(PathBuf, &'static str)> {
    if cfg!(target_os = "linux") {
        Ok((
            dirs.config
                .join("systemd/user")
                .join(format!("{UNIT}.service")),
            "systemctl --user daemon-reload && systemctl --user enable --now cuba-exec-http",
        ))
    } else if cfg!(target_os = "macos") {
        Ok((
            dirs.home
                .join("Library/LaunchAgents")
                .join(format!("{LAUNCHD_LABEL}.plist")),
            "launchctl load -w ~/Library/LaunchAgents/dev.cuba-exec.http.plist",
        ))
    } else {
        bail!(
            "setup --http writes a systemd (Linux) or launchd (macOS) service; here, run \
             `cuba-exec serve --http` under the system's service manager"
        )
    }
}

/// The unit's text for `exe` and `env`.
fn unit(exe: &str, env: &[(String, String)]) -> String {
    if cfg!(target_os = "macos") {
        let mut vars = String::new();
        for (k, v) in env {
            vars.push_str(&format!(
                "    <key>{}</key><string>{}</string>\n",
                xml(k),
                xml(v)
            ));
        }
        return format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \
             \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
             <plist version=\"1.0\">\n<dict>\n  <key>Label</key><string>{LAUNCHD_LABEL}</string>\n  \
             <key>ProgramArguments</key>\n  <array><string>{}</string><string>serve</string>\
             <string>--http</string></array>\n  <key>EnvironmentVariables</key>\n  <dict>\n{vars}  \
             </dict>\n  <key>RunAtLoad</key><true/>\n  <key>KeepAlive</key><true/>\n</dict>\n\
             </plist>\n",
            xml(exe)
        );
    }
    let mut vars = String::new();
    for (k, v) in env {
        vars.push_str(&format!("Environment=\"{k}={}\"\n", v.replace('"', "\\\"")));
    }
    format!(
        "# Written by `cubactl setup --http`; `cubactl setup --http --remove` takes it out.\n\
         [Unit]\nDescription=cuba-exec: MCP over HTTP (settings: [http] in config.toml)\n\n\
         [Service]\nExecStart={exe} serve --http\n{vars}Restart=on-failure\nRestartSec=2\n\n\
         [Install]\nWantedBy=default.target\n"
    )
}

fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Writes, shows or removes the unit.
pub fn run(
    dirs: &Dirs,
    exe: Option<&str>,
    env: &[(String, String)],
    dry_run: bool,
) -> Result<ExitCode> {
    let (path, start) = place(dirs)?;
    let shown = dirs.show(&path);
    let Some(exe) = exe else {
        if !path.exists() {
            println!("{shown}: no unit to remove");
        } else if dry_run {
            println!("{shown}: would be removed");
        } else {
            std::fs::remove_file(&path)?;
            println!("{shown}: removed (stop it first if it runs: systemctl --user disable --now {UNIT} / launchctl unload)");
        }
        return Ok(ExitCode::SUCCESS);
    };
    let text = unit(exe, env);
    if dry_run {
        println!("{shown} would be:\n\n{text}");
        return Ok(ExitCode::SUCCESS);
    }
    write(&path, &text)?;
    println!("{shown}: written. Start it now and at every login:\n  {start}");
    println!("Then `cubactl http status` shows where it serves; `cubactl token create NAME` makes a client's token.");
    Ok(ExitCode::SUCCESS)
}

fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let original = files::read(path)?;
    if let Some(old) = &original {
        if old != text {
            files::backup(path, old)?;
        }
    }
    files::replace(path, text, original.as_deref())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_unit_runs_the_endpoint_with_its_environment() {
        let text = unit(
            "/opt/bin/cuba-exec",
            &[("CUBA_EXEC_CONFIG".into(), "/etc/c.toml".into())],
        );
        assert!(text.contains("cuba-exec"), "{text}");
        assert!(text.contains("serve"), "{text}");
        assert!(text.contains("CUBA_EXEC_CONFIG"), "{text}");
        if cfg!(target_os = "linux") {
            assert!(
                text.contains("ExecStart=/opt/bin/cuba-exec serve --http\n"),
                "{text}"
            );
            assert!(
                text.contains("Environment=\"CUBA_EXEC_CONFIG=/etc/c.toml\""),
                "{text}"
            );
        }
    }
}
