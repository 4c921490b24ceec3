//! What the shim asks the operating system, behind one function per question, so another
//! system is an added implementation rather than an edit of the callers. Linux reads `/proc`;
//! elsewhere the answer is "unknown" until an implementation is added.

/// The name of the process that launched this one (the editor), for MCP clients that do not
/// say who they are.
pub fn parent_name() -> Option<String> {
    os::parent_name()
}

#[cfg(target_os = "linux")]
mod os {
    pub fn parent_name() -> Option<String> {
        let ppid = std::os::unix::process::parent_id();
        std::fs::read_to_string(format!("/proc/{ppid}/comm"))
            .map(|s| s.trim().to_string())
            .ok()
            .filter(|s| !s.is_empty())
    }
}

#[cfg(not(target_os = "linux"))]
mod os {
    pub fn parent_name() -> Option<String> {
        None
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn the_parent_has_a_name() {
        // The test harness was started by cargo (or a shell): some process with a name.
        assert!(super::parent_name().is_some_and(|n| !n.is_empty()));
    }
}
