//! The first and last error lines of a reply whose output was cut: in its header, as
//! ` errors:3 first:src/main.rs:3:5@18234 last:src/lib.rs:9:1@90211`, and in its structured
//! content (in no schema: tools/list is paid in every turn; docs/tools.md names it).

use cuba_protocol::{ErrorMark, ErrorMarks};
use serde::Serialize;

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct ErrorsReply {
    pub count: u64,
    pub first: MarkReply,
    pub last: MarkReply,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct MarkReply {
    /// Pass as `since` to read on from the line.
    pub cursor: u64,
    pub line: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

impl From<&ErrorMark> for MarkReply {
    fn from(m: &ErrorMark) -> MarkReply {
        MarkReply {
            cursor: m.cursor,
            line: m.line.clone(),
            location: m.location.clone(),
        }
    }
}

impl From<&ErrorMarks> for ErrorsReply {
    fn from(m: &ErrorMarks) -> ErrorsReply {
        ErrorsReply {
            count: m.count,
            first: (&m.first).into(),
            last: (&m.last).into(),
        }
    }
}

impl ErrorsReply {
    /// The header's words: the count, the first error, and the last when it is another line.
    pub fn tokens(&self) -> String {
        let mark = |m: &MarkReply| format!("{}@{}", m.location.as_deref().unwrap_or(""), m.cursor);
        let mut t = format!(" errors:{} first:{}", self.count, mark(&self.first));
        if self.last.cursor != self.first.cursor {
            t.push_str(&format!(" last:{}", mark(&self.last)));
        }
        t
    }

    /// The hint's words: where to read on from the first error.
    pub fn hint(&self, id: u64) -> String {
        format!(
            "the first error is at cursor {0}: status(id={id}, since={0}) reads on from it",
            self.first.cursor
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_names_each_error_where_it_is() {
        let mark = |cursor, location: Option<&str>| ErrorMark {
            cursor,
            line: "error".into(),
            location: location.map(String::from),
        };
        let marks = ErrorMarks {
            first: mark(18234, Some("src/main.rs:3:5")),
            last: mark(90211, None),
            count: 3,
        };
        let r = ErrorsReply::from(&marks);
        assert_eq!(
            r.tokens(),
            " errors:3 first:src/main.rs:3:5@18234 last:@90211"
        );
        let one = ErrorMarks {
            first: mark(7, Some("a.c:1:2")),
            last: mark(7, Some("a.c:1:2")),
            count: 1,
        };
        assert_eq!(
            ErrorsReply::from(&one).tokens(),
            " errors:1 first:a.c:1:2@7"
        );
    }
}
