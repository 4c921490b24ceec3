//! Whether every exec in a tree is checked (Linux, seccomp user notification), and how the
//! daemon's status says so.

/// The exec checks' state for every launch.
pub enum ExecChecking {
    #[cfg(target_os = "linux")]
    Active(std::sync::Arc<super::exec_check::ExecService>, String),
    /// Not here, and why; `required` (`exec_checks = "on"`): no command starts.
    Unavailable {
        why: String,
        required: bool,
    },
    Off,
}

impl ExecChecking {
    /// Starts the checks as `setting` says.
    pub fn start(config: &crate::base::config::Config) -> ExecChecking {
        let (setting, policy) = (config.exec_checks, &config.policy);
        use crate::base::config::ExecChecks;
        if setting == ExecChecks::Off {
            return ExecChecking::Off;
        }
        let required = setting == ExecChecks::On;
        #[cfg(target_os = "linux")]
        {
            let how = crate::platform::exec_check::probe().and_then(|how| {
                let own = &config.socket;
                match super::exec_check::ExecService::start(!config.allow_namespaces, own) {
                    Ok(s) => Ok((s, how)),
                    Err(e) => Err(format!("cannot start the exec checks' thread: {e}")),
                }
            });
            match how {
                Ok((service, mut how)) => {
                    if !config.allow_namespaces {
                        how.push_str("; namespaces and mounts refused");
                    }
                    // The blocked names' files, found once now rather than at the first exec.
                    crate::parts::exec_rules::ExecRules::preload(policy);
                    ExecChecking::Active(std::sync::Arc::new(service), how)
                }
                Err(why) => ExecChecking::Unavailable { why, required },
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = policy;
            let why = "this OS has no seccomp user notification".to_string();
            ExecChecking::Unavailable { why, required }
        }
    }

    /// One line for `DaemonStatus.exec_checks`.
    pub fn describe(&self) -> String {
        match self {
            #[cfg(target_os = "linux")]
            ExecChecking::Active(_, how) => format!("on ({how})"),
            ExecChecking::Unavailable {
                why,
                required: false,
            } => format!("unavailable ({why})"),
            ExecChecking::Unavailable {
                why,
                required: true,
            } => format!("unavailable ({why}); exec_checks = \"on\", so no command starts"),
            ExecChecking::Off => "off (exec_checks = \"off\")".to_string(),
        }
    }

    /// Stops the exec checks between two notifications for a hand-over to a new program,
    /// until the value returned is dropped: an exec received and not yet answered would be
    /// answered by no one after it, and its caller would wait for ever. Refused while an exec
    /// waits for a person's answer, or if the checks did not stop `within`.
    #[cfg(unix)]
    pub async fn pause(&self, within: std::time::Duration) -> Result<ExecChecksPaused, String> {
        match self {
            #[cfg(target_os = "linux")]
            ExecChecking::Active(service, _) => match service.pause(within).await {
                Ok(paused) => Ok(ExecChecksPaused(Some(Box::new(paused)))),
                Err(Some(pids)) => {
                    let pids: Vec<String> = pids.iter().map(|p| p.to_string()).collect();
                    Err(format!(
                        "an exec waits for a person's answer (pid {}); answer it (cubactl \
                         approvals), then upgrade",
                        pids.join(", ")
                    ))
                }
                Err(None) => Err("the exec checks did not pause; try again".to_string()),
            },
            _ => {
                let _ = within;
                Ok(ExecChecksPaused(None))
            }
        }
    }
}

/// The exec checks stopped for a hand-over ([`ExecChecking::pause`]); dropped, they go on.
#[cfg(unix)]
pub struct ExecChecksPaused(#[allow(dead_code)] Option<Box<dyn Send>>);
