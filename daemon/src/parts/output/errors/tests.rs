#![allow(clippy::unwrap_used)]

use super::*;

/// `out` scanned in chunks of `size` bytes.
fn scan(out: &[u8], size: usize) -> ErrorScan {
    let mut s = ErrorScan::default();
    let mut at = 0;
    for chunk in out.chunks(size.max(1)) {
        s.feed(chunk, at);
        at += chunk.len() as u64;
    }
    s.end();
    s
}

fn noise(lines: usize) -> String {
    (0..lines).map(|i| format!("{i}\n")).collect()
}

/// A failing `cargo build` as it prints it, between noise.
const CARGO: &str = "   Compiling demo v0.1.0 (/tmp/demo)
error[E0308]: mismatched types
 --> src/main.rs:2:18
  |
2 |     let x: i32 = \"a\";
  |            ---   ^^^ expected `i32`, found `&str`
  |            |
  |            expected due to this

error[E0425]: cannot find value `y` in this scope
 --> src/lib.rs:9:1
  |
9 | y
  | ^ not found in this scope

Some errors have detailed explanations: E0308, E0425.
error: could not compile `demo` (bin \"demo\") due to 2 previous errors
";

#[test]
fn the_first_and_last_error_are_found_wherever_the_chunks_cut() {
    let before = noise(3000);
    let out = format!("{before}{CARGO}{}", noise(3000));
    let first_at = (before.len() + CARGO.find("error[E0308]").unwrap()) as u64;
    let last_at = (before.len() + CARGO.find("error[E0425]").unwrap()) as u64;
    for size in [1, 2, 7, 64, 4096, 1 << 20] {
        let s = scan(out.as_bytes(), size);
        let m = s.marks().unwrap();
        assert_eq!(m.count, 2, "chunks of {size}");
        assert_eq!(m.first.cursor, first_at);
        assert_eq!(m.first.line, "error[E0308]: mismatched types");
        assert_eq!(m.first.location.as_deref(), Some("src/main.rs:2:18"));
        assert_eq!(m.last.cursor, last_at);
        assert_eq!(m.last.location.as_deref(), Some("src/lib.rs:9:1"));
    }
}

#[test]
fn pytest_takes_the_location_that_follows_its_e_lines() {
    let out = "    def test_y():
>       assert 1 == 2
E       assert 1 == 2

t/test_x.py:2: AssertionError
=========================== short test summary info ============================
FAILED t/test_x.py::test_y - assert 1 == 2
1 failed in 0.02s
";
    let m = scan(out.as_bytes(), 5).marks.unwrap();
    assert_eq!(m.count, 3);
    assert_eq!(m.first.line, "E       assert 1 == 2");
    assert_eq!(m.first.location.as_deref(), Some("t/test_x.py:2"));
    assert_eq!(m.last.location.as_deref(), Some("t/test_x.py"));
}

#[test]
fn an_eslint_problem_is_in_the_file_that_heads_its_group() {
    let out = "
/home/u/app/src/a.js
  3:5   error  'x' is not defined  no-undef
  7:10  error  Missing semicolon   semi

/home/u/app/src/b.js
  1:1  error  Unexpected var  no-var

✖ 3 problems (3 errors, 0 warnings)
";
    for size in [3, 1 << 16] {
        let m = scan(out.as_bytes(), size).marks.unwrap();
        assert_eq!(m.count, 3);
        assert_eq!(
            m.first.location.as_deref(),
            Some("/home/u/app/src/a.js:3:5")
        );
        assert_eq!(m.last.location.as_deref(), Some("/home/u/app/src/b.js:1:1"));
    }
}

#[test]
fn coloured_lines_and_a_last_line_without_end_are_seen() {
    let out = b"ok\n\x1b[0m\x1b[1m\x1b[38;5;9merror[E0599]\x1b[0m\x1b[1m: no method\x1b[0m\r\n\
        \x1b[0m \x1b[0m\x1b[1m\x1b[38;5;12m--> \x1b[0msrc/x.rs:4:7\nnpm error code 1";
    let m = scan(out, 4).marks.unwrap();
    assert_eq!(m.first.line, "error[E0599]: no method");
    assert_eq!(m.first.location.as_deref(), Some("src/x.rs:4:7"));
    assert_eq!(m.last.line, "npm error code 1");
    assert_eq!(m.count, 2);
}

#[test]
fn a_line_without_end_carries_only_its_start() {
    let mut s = ErrorScan::default();
    s.feed(b"error: early\n", 0);
    let mut at = 13;
    for _ in 0..1000 {
        s.feed(&[b'x'; 65536], at);
        at += 65536;
        assert!(s.carry.len() <= MAX_LINE_SCAN);
    }
    s.feed(b"\na.c:1:2: error: late\n", at);
    let m = s.marks().unwrap();
    assert_eq!((m.first.cursor, m.last.cursor), (0, at + 1));
    assert_eq!(m.last.location.as_deref(), Some("a.c:1:2"));
    // A long line is kept to its first bytes in a mark.
    let long = format!("error: {}\n", "y".repeat(5000));
    let m = scan(long.as_bytes(), 100).marks.unwrap();
    assert_eq!(m.first.line.len(), ErrorMark::MAX_LINE);
}

#[test]
fn output_without_errors_has_no_marks() {
    let out = format!("{}warning: unused\nall fine, no error here\n", noise(10000));
    assert!(scan(out.as_bytes(), 4096).marks().is_none());
}

/// The scan's rate over 100 MB of log-like text without errors, and with an error line every
/// 1000 lines (`cargo test --release -p cuba-daemon scan_rate -- --ignored --nocapture`).
#[test]
#[ignore = "a measurement"]
fn scan_rate() {
    let line = "   Compiling some-crate v1.2.3 (/home/u/src/some-crate) in 0.42s\n";
    let quiet: String = line.repeat(100_000_000 / line.len());
    let mut noisy = String::new();
    for i in 0..(100_000_000 / line.len()) {
        match i % 1000 {
            0 => noisy.push_str("src/a.ts(3,5): error TS2322: Type 'string' is not assignable.\n"),
            _ => noisy.push_str(line),
        }
    }
    let digits = noise(14_000_000);
    for (name, out) in [("seq", &digits), ("quiet", &quiet), ("noisy", &noisy)] {
        let start = std::time::Instant::now();
        let s = scan(out.as_bytes(), 256 * 1024);
        let took = start.elapsed();
        let mb = out.len() as f64 / 1e6;
        let count = s.marks().map_or(0, |m| m.count);
        println!(
            "{name}: {mb:.0} MB in {took:?}: {:.0} MB/s ({count} errors)",
            mb / took.as_secs_f64()
        );
    }
}
