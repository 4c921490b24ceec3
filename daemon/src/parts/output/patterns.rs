//! The error lines of the common toolchains, and the lines that say where an error is.
//!
//! Only lines that contain one of [`NEEDLES`] are looked at (`errors.rs`), so every error
//! pattern here must contain one of them; a line that only names a location is looked at
//! just after an error line that had none.

use std::sync::LazyLock;

use regex::Regex;

/// Substrings one of which every error line contains: the cheap test before any pattern.
pub const NEEDLES: &[&str] = &[
    "error",
    "Error",
    "ERR",
    "FAIL",
    "E   ",
    "Exception",
    ".go:",
    "***",
    "●",
];

/// What a line is.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// An error line, with the location it names, if any.
    Error(Option<String>),
    /// An eslint problem: `LINE:COL` under the file's line, which heads its group.
    Eslint(String),
    /// A line that only says where (rustc's ` --> src/main.rs:3:5`, a test's stack frame).
    Location(String),
}

/// An error line's pattern and how its location is built from the captures.
struct Pattern {
    re: Regex,
    /// Capture groups joined by `:` as the location (an empty list: none); a group that did
    /// not take part is left out.
    at: &'static [usize],
}

fn pattern(re: &str, at: &'static [usize]) -> Pattern {
    // The patterns are constants: a test compiles every one.
    #[allow(clippy::expect_used)]
    let re = Regex::new(re).expect("error pattern");
    Pattern { re, at }
}

/// Error lines, the most specific first.
static ERRORS: LazyLock<Vec<Pattern>> = LazyLock::new(|| {
    vec![
        // tsc: `src/a.ts(3,5): error TS2322: …` and its pretty form `src/a.ts:3:5 - error TS…`.
        pattern(r"^(\S[^(]*)\((\d+),(\d+)\): error TS\d+", &[1, 2, 3]),
        pattern(r"^(\S+?):(\d+):(\d+) - error TS\d+", &[1, 2, 3]),
        // gcc, clang, and any compiler of that form: `a.c:3:5: error: …`, `a.c:3: error: …`.
        pattern(r"^(\S+?):(\d+):(?:(\d+):)? (?:fatal )?error:", &[1, 2, 3]),
        // rustc / cargo: `error[E0308]: …`, `error: …` (its location follows: ` --> …`).
        pattern(r"^error(?:\[E\d+\])?: ", &[]),
        // `collect2: error: ld returned 1 exit status`, `clang: error: …`.
        pattern(r"^[\w.+-]+: (?:fatal )?error: ", &[]),
        // go: `./main.go:3:5: undefined: x`, and `--- FAIL: TestX (0.00s)`.
        pattern(r"^(\S+\.go):(\d+):(\d+): ", &[1, 2, 3]),
        pattern(r"^\s*--- FAIL: \S+", &[]),
        // pytest: `FAILED tests/test_x.py::test_y - …`, `ERROR tests/test_x.py - …`,
        // `E       assert 1 == 2`, `tests/test_x.py:12: AssertionError`.
        pattern(r"^(?:FAILED|ERROR) ([^\s:]+)(::\S+)?", &[1]),
        pattern(r"^E {3}", &[]),
        pattern(
            r"^(\S+\.py):(\d+): (?:[\w.]*(?:Error|Exception)|Failed)\b",
            &[1, 2],
        ),
        // A Python or JavaScript exception: `ValueError: …`, `TypeError: …`.
        pattern(r"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception): ", &[]),
        // make: `make: *** [Makefile:3: all] Error 1` (older makes: `make: *** [all] Error 1`).
        pattern(
            r"^\S*make(?:\[\d+\])?: \*\*\* (?:\[([^\s:\]]+):(\d+):)?",
            &[1, 2],
        ),
        // jest: `● Suite › test`, `● Test suite failed to run`.
        pattern(r"^\s*● (?:.+ › .+|Test suite failed to run)", &[]),
        // npm: `npm ERR! code 1` (npm 6–9), `npm error code 1` (npm 10).
        pattern(r"^npm (?:ERR!|error) ", &[]),
    ]
});

/// Lines summing up errors already shown: no error of their own.
static SUMMARIES: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used)]
    Regex::new(r"^error: (?:could not compile|aborting due to)").expect("summary pattern")
});

/// eslint's stylish form: `  3:5  error  'x' is not defined  no-undef`.
static ESLINT: LazyLock<Regex> = LazyLock::new(|| {
    #[allow(clippy::expect_used)]
    Regex::new(r"^\s+(\d+:\d+)\s+error\s+\S").expect("eslint pattern")
});

/// Lines that name where the error above them is.
static LOCATIONS: LazyLock<Vec<Pattern>> = LazyLock::new(|| {
    vec![
        // rustc: `  --> src/main.rs:3:5`.
        pattern(r"^\s*--> (\S+?):(\d+):(\d+)", &[1, 2, 3]),
        // go test: `    x_test.go:12: got 1, want 2`.
        pattern(r"^\s+(\S+\.go):(\d+): ", &[1, 2]),
        // A stack frame: `    at Object.<anonymous> (src/sum.test.js:5:13)`.
        pattern(r"^\s+at .*\(([^()\s]+?):(\d+):(\d+)\)$", &[1, 2, 3]),
        // Python: `  File "x.py", line 3, in <module>`.
        pattern(r#"^\s+File "([^"]+)", line (\d+)"#, &[1, 2]),
    ]
});

/// What `line` (escapes removed, no line end) is, if it is anything.
pub fn classify(line: &str) -> Option<Found> {
    if let Some(c) = ESLINT.captures(line) {
        return Some(Found::Eslint(c[1].to_string()));
    }
    if SUMMARIES.is_match(line) {
        return None;
    }
    if let Some(found) = first_match(&ERRORS, line) {
        return Some(Found::Error(found));
    }
    first_match(&LOCATIONS, line).flatten().map(Found::Location)
}

/// The first of `patterns` that matches `line`, and the location it builds.
fn first_match(patterns: &[Pattern], line: &str) -> Option<Option<String>> {
    patterns.iter().find_map(|p| {
        let c = p.re.captures(line)?;
        let parts: Vec<&str> =
            p.at.iter()
                .filter_map(|&i| c.get(i).map(|m| m.as_str()))
                .collect();
        Some(Some(parts.join(":")).filter(|l| !l.is_empty()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(line: &str) -> Option<String> {
        assert!(
            NEEDLES.iter().any(|n| line.contains(n)),
            "no needle in {line:?}: it would never be looked at"
        );
        match classify(line) {
            Some(Found::Error(at)) => at,
            other => panic!("{line:?} is no error line: {other:?}"),
        }
    }

    fn at(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    // Lines as the tools print them (gcc 12, make 4.3, pytest 8, npm 10, node 20, cargo 1.9x).
    #[test]
    fn the_toolchains_error_lines_and_their_locations() {
        assert_eq!(error("error[E0308]: mismatched types"), None);
        assert_eq!(error("error: cannot find value `y` in this scope"), None);
        assert_eq!(
            error("src/a.ts(3,5): error TS2322: Type 'string' is not assignable to type 'number'."),
            at("src/a.ts:3:5")
        );
        assert_eq!(
            error("src/a.ts:3:5 - error TS2322: Type 'string' is not assignable to type 'number'."),
            at("src/a.ts:3:5")
        );
        assert_eq!(
            error("a.c:1:37: error: ‘y’ undeclared (first use in this function)"),
            at("a.c:1:37")
        );
        assert_eq!(
            error("a.c:1:10: fatal error: nothere.h: No such file or directory"),
            at("a.c:1:10")
        );
        assert_eq!(error("collect2: error: ld returned 1 exit status"), None);
        assert_eq!(error("./main.go:3:5: undefined: x"), at("./main.go:3:5"));
        assert_eq!(error("--- FAIL: TestAdd (0.00s)"), None);
        assert_eq!(
            error("FAILED t/test_x.py::test_y - assert 1 == 2"),
            at("t/test_x.py")
        );
        assert_eq!(
            error("ERROR tests/test_b.py - ModuleNotFoundError: No module named 'x'"),
            at("tests/test_b.py")
        );
        assert_eq!(error("E       assert 1 == 2"), None);
        assert_eq!(error("t/test_x.py:2: AssertionError"), at("t/test_x.py:2"));
        assert_eq!(
            error("TypeError: Cannot read properties of null (reading 'x')"),
            None
        );
        assert_eq!(
            error("make: *** [Makefile:2: all] Error 1"),
            at("Makefile:2")
        );
        assert_eq!(error("make[1]: *** [all] Error 2"), None);
        assert_eq!(error("  ● Suite › adds numbers"), None);
        assert_eq!(error("  ● Test suite failed to run"), None);
        assert_eq!(error("npm error code ENOENT"), None);
        assert_eq!(error("npm ERR! code ELIFECYCLE"), None);
        assert_eq!(
            classify("  3:5  error  'x' is not defined  no-undef"),
            Some(Found::Eslint("3:5".into()))
        );
    }

    #[test]
    fn lines_that_say_where() {
        for (line, loc) in [
            (" --> src/main.rs:3:5", "src/main.rs:3:5"),
            ("   --> src/lib.rs:120:17", "src/lib.rs:120:17"),
            ("    add_test.go:12: got 1, want 2", "add_test.go:12"),
            (
                "      at Object.<anonymous> (src/sum.test.js:5:13)",
                "src/sum.test.js:5:13",
            ),
            ("  File \"x.py\", line 3, in <module>", "x.py:3"),
        ] {
            assert_eq!(classify(line), Some(Found::Location(loc.into())), "{line}");
        }
    }

    #[test]
    fn ordinary_lines_and_summaries_are_nothing() {
        for line in [
            "error: could not compile `demo` (bin \"demo\") due to 1 previous error",
            "error: aborting due to 2 previous errors",
            "   Compiling demo v0.1.0 (/tmp/demo)",
            "warning: unused variable: `x`",
            "a.c:1:25: warning: initialization of ‘int’ from ‘char *’",
            "a.c:1:37: note: each undeclared identifier is reported only once",
            "no errors found",
            "test result: FAILED. 0 passed; 1 failed",
            "FAIL\texample.com/demo\t0.003s",
            "● cuba.service - a unit",
            "  ● Console",
            "12345",
        ] {
            assert_eq!(classify(line), None, "{line}");
        }
    }
}
