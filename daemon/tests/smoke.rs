//! The `cubad` binary builds and starts: `cubad --help` succeeds. Also makes `cargo test
//! --workspace` build `cubad` before the end-to-end tests in `tests/` look for it.

#[test]
fn cubad_help_succeeds() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cubad"))
        .arg("--help")
        .output()
        .expect("cannot run cubad");
    assert!(out.status.success(), "cubad --help failed: {out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("--socket"));
}
