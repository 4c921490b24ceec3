//! The first error of a long output, whatever the cut: a real failing `cargo build` and a real
//! failing pytest run, each between 200 KB of noise, through `run` and `status(since=…)`.

use std::path::Path;

use crate::common;

use common::mcp::{in_process, Mcp, Reply};
use common::TestDir;
use serde_json::json;

async fn setup() -> (TestDir, Mcp) {
    let t = TestDir::with_daemon().await;
    let c = in_process(&t.socket(), "errors-test").await;
    (t, c)
}

/// `command` between two `seq 1 40000` (229 KB each): no head or tail reaches its output.
fn in_noise(command: &str) -> String {
    format!("seq 1 40000; {command}; seq 1 40000")
}

/// The reply's first and last error, their cursors, and the lines around the first.
fn check_first_error(r: &Reply, location: &str, line: &str) -> u64 {
    let header = r.text().lines().next().unwrap_or_default().to_string();
    let errors = &r.sc()["errors"];
    let cursor = errors["first"]["cursor"]
        .as_u64()
        .unwrap_or_else(|| panic!("no errors in {}", r.sc()));
    assert_eq!(errors["first"]["location"], location, "{errors}");
    assert_eq!(errors["first"]["line"], line, "{errors}");
    assert!(
        header.contains(&format!(" first:{location}@{cursor}")),
        "{header}"
    );
    assert!(header.contains(" trunc:"), "{header}");
    // The line is shown though it sits in the middle, between two cut markers.
    let out = r.output();
    let at = out
        .find(&format!("\n{line}\n"))
        .unwrap_or_else(|| panic!("{line:?} not shown: {out}"));
    let markers: Vec<usize> = out
        .match_indices("bytes truncated ...]")
        .map(|m| m.0)
        .collect();
    assert!(
        markers.len() >= 2 && markers[0] < at && *markers.last().unwrap_or(&0) > at,
        "{out}"
    );
    assert!(
        out.starts_with("1\n2\n") && out.ends_with("\n40000\n"),
        "{out}"
    );
    assert!(
        out.len() < 9 * 1024,
        "the reply keeps its bound: {}",
        out.len()
    );
    assert!(
        r.text().contains(&format!("since={cursor}")),
        "the hint: {}",
        r.text()
    );
    cursor
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_cargo_build_names_its_first_error_in_the_middle() {
    let (t, c) = setup().await;
    let dir = t.path().join("demo");
    std::fs::create_dir_all(dir.join("src")).expect("crate dir");
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .expect("Cargo.toml");
    std::fs::write(
        dir.join("src/main.rs"),
        "fn main() {\n    let x: i32 = \"a\";\n    println!(\"{x}\");\n}\n",
    )
    .expect("main.rs");
    let build = format!(
        "CARGO_TARGET_DIR={0}/target cargo build --offline --manifest-path {0}/Cargo.toml 2>&1",
        dir.display()
    );
    let r = c
        .call_within(
            "run",
            json!({ "command": in_noise(&build) }),
            std::time::Duration::from_secs(120),
        )
        .await;
    let cursor = check_first_error(&r, "src/main.rs:2:18", "error[E0308]: mismatched types");
    assert!(
        r.output().contains(" --> src/main.rs:2:18\n"),
        "{}",
        r.output()
    );
    assert_eq!(r.sc()["errors"]["count"], 1, "the summary line is no error");
    // status(since=cursor) reads on from the error line.
    let s = c
        .call("status", json!({ "id": r.id(), "since": cursor }))
        .await;
    assert!(
        s.output()
            .starts_with("error[E0308]: mismatched types\n --> src/main.rs:2:18\n"),
        "{}",
        s.output()
    );
    c.close().await;
}

/// A Python with pytest: this one's, or a virtual environment's beside the checkout.
fn pytest_python() -> Option<String> {
    let works = |py: &str| {
        std::process::Command::new(py)
            .args(["-m", "pytest", "--version"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    ["python3".to_string(), venv.display().to_string()]
        .into_iter()
        .chain(std::env::var("CUBA_TEST_PYTEST").ok())
        .find(|py| works(py))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_pytest_run_names_its_first_error_in_the_middle() {
    let Some(python) = pytest_python() else {
        eprintln!("skipped: no Python with pytest (set CUBA_TEST_PYTEST to one)");
        return;
    };
    let (t, c) = setup().await;
    let dir = t.path().join("py");
    std::fs::create_dir_all(&dir).expect("test dir");
    std::fs::write(
        dir.join("test_x.py"),
        "def test_ok():\n    pass\n\ndef test_y():\n    assert 1 == 2\n",
    )
    .expect("test file");
    let pytest = format!(
        "cd {} && {python} -m pytest -q -p no:cacheprovider test_x.py",
        dir.display()
    );
    let r = c
        .call_within(
            "run",
            json!({ "command": in_noise(&pytest) }),
            std::time::Duration::from_secs(120),
        )
        .await;
    let cursor = check_first_error(&r, "test_x.py:5", "E       assert 1 == 2");
    assert!(
        r.output().contains("\ntest_x.py:5: AssertionError\n"),
        "{}",
        r.output()
    );
    let last = &r.sc()["errors"]["last"];
    assert_eq!(
        last["line"], "FAILED test_x.py::test_y - assert 1 == 2",
        "{last}"
    );
    let s = c
        .call("status", json!({ "id": r.id(), "since": cursor }))
        .await;
    assert!(
        s.output().starts_with("E       assert 1 == 2\n"),
        "{}",
        s.output()
    );
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_or_clean_output_says_nothing_of_errors() {
    let (_t, c) = setup().await;
    // Whole: nothing cut, so the header stays as short as ever.
    let r = c
        .call("run", json!({ "command": "echo 'error: x' >&2; exit 1" }))
        .await;
    assert!(!r.text().contains("errors:"), "{}", r.text());
    assert!(r.sc().get("errors").is_none(), "{}", r.sc());
    // Cut, with no error in it.
    let r = c.call("run", json!({ "command": "seq 1 40000" })).await;
    assert!(
        r.text().contains(" trunc:") && !r.text().contains("errors:"),
        "{}",
        r.text()
    );
    c.close().await;
}
