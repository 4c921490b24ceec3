//! Plain-text tables fitted to a width: optional columns go first, then the flexible column
//! (the command) is cut with `…`. Cell text is made safe to print (no control characters).

use crate::style::{Paint, Style};

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

pub struct Column {
    pub header: &'static str,
    pub align: Align,
    /// Takes what width is left, and is cut to fit.
    pub flex: bool,
    /// Dropped when the table does not fit, lowest first. `None`: always shown.
    pub optional: Option<u8>,
}

impl Column {
    pub const fn left(header: &'static str) -> Column {
        Column {
            header,
            align: Align::Left,
            flex: false,
            optional: None,
        }
    }

    pub const fn right(header: &'static str) -> Column {
        Column {
            align: Align::Right,
            ..Column::left(header)
        }
    }

    pub const fn flex(mut self) -> Column {
        self.flex = true;
        self
    }

    pub const fn optional(mut self, priority: u8) -> Column {
        self.optional = Some(priority);
        self
    }
}

pub struct Cell {
    text: String,
    paint: Option<Paint>,
}

impl Cell {
    pub fn new(text: impl AsRef<str>) -> Cell {
        Cell {
            text: sanitize(text.as_ref()),
            paint: None,
        }
    }

    pub fn painted(text: impl AsRef<str>, paint: Option<Paint>) -> Cell {
        Cell {
            paint,
            ..Cell::new(text)
        }
    }
}

/// Control characters (newlines, escapes an agent's command might carry) become spaces.
pub fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

const GAP: usize = 2;
const MIN_FLEX: usize = 12;

pub struct Table {
    columns: Vec<Column>,
    rows: Vec<Vec<Cell>>,
}

impl Table {
    pub fn new(columns: Vec<Column>) -> Table {
        Table {
            columns,
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<Cell>) {
        self.rows.push(row);
    }

    /// The table as lines, each fitted to `width` when one is given.
    pub fn render(&self, style: Style, width: Option<usize>) -> String {
        let mut shown: Vec<usize> = (0..self.columns.len()).collect();
        let mut widths: Vec<usize> = (0..self.columns.len()).map(|c| self.natural(c)).collect();
        let total = |shown: &[usize], widths: &[usize]| -> usize {
            shown.iter().map(|&c| widths[c]).sum::<usize>() + GAP * shown.len().saturating_sub(1)
        };
        if let Some(limit) = width {
            // Drop optional columns, lowest priority first, while even a narrow flex column
            // would not fit.
            let flex_floor = |shown: &[usize], widths: &[usize]| -> usize {
                let mut w = widths.to_vec();
                for &c in shown {
                    if self.columns[c].flex {
                        w[c] = w[c].min(MIN_FLEX);
                    }
                }
                total(shown, &w)
            };
            while flex_floor(&shown, &widths) > limit {
                let victim = shown
                    .iter()
                    .filter_map(|&c| self.columns[c].optional.map(|p| (p, c)))
                    .min();
                match victim {
                    Some((_, c)) => shown.retain(|&s| s != c),
                    None => break,
                }
            }
            let over = total(&shown, &widths).saturating_sub(limit);
            if let Some(&flex) = shown.iter().find(|&&c| self.columns[c].flex) {
                widths[flex] = widths[flex]
                    .saturating_sub(over)
                    .max(MIN_FLEX.min(widths[flex]));
            }
        }
        let mut out = String::new();
        let header: Vec<Cell> = self
            .columns
            .iter()
            .map(|c| Cell::painted(c.header, Some(Paint::Bold)))
            .collect();
        for row in std::iter::once(&header).chain(&self.rows) {
            let mut line = String::new();
            for (i, &c) in shown.iter().enumerate() {
                let last = i + 1 == shown.len();
                let cell = &row[c];
                let text = fit(&cell.text, widths[c]);
                let pad = widths[c].saturating_sub(text.chars().count());
                let painted = style.paint(cell.paint, &text);
                match self.columns[c].align {
                    Align::Right => line.push_str(&format!("{}{painted}", " ".repeat(pad))),
                    Align::Left if last => line.push_str(&painted),
                    Align::Left => line.push_str(&format!("{painted}{}", " ".repeat(pad))),
                }
                if !last {
                    line.push_str(&" ".repeat(GAP));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    fn natural(&self, c: usize) -> usize {
        self.rows
            .iter()
            .map(|r| r[c].text.chars().count())
            .chain([self.columns[c].header.len()])
            .max()
            .unwrap_or(0)
    }
}

/// `text` cut to `width` characters, ending in `…` when cut.
fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut s: String = text.chars().take(width.saturating_sub(1)).collect();
    s.push('…');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new(vec![
            Column::right("ID"),
            Column::left("PORTS").optional(1),
            Column::left("COMMAND").flex(),
        ]);
        t.push(vec![
            Cell::new("1"),
            Cell::new(":8000"),
            Cell::new("python3 -m http.server 8000 --bind 127.0.0.1"),
        ]);
        t
    }

    #[test]
    fn fits_the_width_by_cutting_the_command() {
        let out = sample().render(Style { on: false }, Some(30));
        assert!(out.lines().all(|l| l.chars().count() <= 30), "{out}");
        assert!(out.contains("PORTS") && out.contains('…'), "{out}");
    }

    #[test]
    fn drops_optional_columns_when_narrow() {
        let out = sample().render(Style { on: false }, Some(20));
        assert!(!out.contains("PORTS"), "{out}");
        assert!(out.lines().all(|l| l.chars().count() <= 20), "{out}");
    }

    #[test]
    fn control_characters_never_reach_the_terminal() {
        assert_eq!(sanitize("a\nb\x1b[2Jc"), "a b [2Jc");
    }
}
