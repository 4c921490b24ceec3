//! The `cubactl` binary builds and starts: `cubactl --help` succeeds. Also makes `cargo test
//! --workspace` build `cubactl` before the end-to-end tests in `tests/` look for it.

#[test]
fn cubactl_help_succeeds() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cubactl"))
        .arg("--help")
        .output()
        .expect("cannot run cubactl");
    assert!(out.status.success(), "cubactl --help failed: {out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("daemon"));
}
