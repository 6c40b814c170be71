//! The CLI's tables (`agent tools`, `agent graphs`, `agent mcp list`, `agent
//! threads`, `agent usage`, `agent runs list`), laid out by comfy-table: columns
//! aligned for any content length and rows fitted to the output's width.
//!
//! Fitting keeps every column between the first and the last whole (effects,
//! decisions, dates: short words) and never cuts the first (an id): an id too
//! long for its column (one that would leave the last column less than
//! [`MIN_LAST`] characters) gets a line of its own, and its row follows on
//! the next line, as clap's help does with long option names. The last
//! column (a description, a title) is cut with `…` to what is left.
//!
//! The width is the terminal's when stdout is one, else `COLUMNS` when set,
//! else unlimited (a pipe gets whole rows).

use std::io::IsTerminal as _;

use comfy_table::{Cell, CellAlignment, ContentArrangement, Row, Table, presets};

/// The fewest characters the last column is given before the first wraps.
pub const MIN_LAST: usize = 16;

/// Spaces between columns.
const GAP: usize = 2;

/// A table laid out for stdout.
#[derive(Debug)]
pub struct TextTable {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    width: Option<usize>,
}

impl TextTable {
    /// An empty table with these column titles, for stdout.
    pub fn new(header: &[&str]) -> Self {
        Self::with_width(header, output_width())
    }

    /// An empty table with these column titles, fitted to `width` (none:
    /// whole rows).
    pub fn with_width(header: &[&str], width: Option<u16>) -> Self {
        Self {
            header: header.iter().map(|h| h.to_uppercase()).collect(),
            rows: Vec::new(),
            width: width.map(usize::from),
        }
    }

    /// Adds a row (cells shown with hidden characters escaped, on one line).
    pub fn row<S: AsRef<str>>(&mut self, cells: impl IntoIterator<Item = S>) {
        let row = cells
            .into_iter()
            .map(|c| crate::render::printable(c.as_ref()).replace(['\n', '\r'], " "))
            .collect();
        self.rows.push(row);
    }

    /// The widths of the first and the last column that fit the output.
    fn fitted(&self) -> (Option<usize>, Option<usize>) {
        let Some(width) = self.width else {
            return (None, None);
        };
        let columns = self.header.len();
        if columns < 2 {
            return (None, Some(width));
        }
        let len = |c: &String| c.chars().count();
        let widest = |i: usize| {
            std::iter::once(&self.header)
                .chain(&self.rows)
                .filter_map(|r| r.get(i))
                .map(len)
                .max()
                .unwrap_or(0)
        };
        let middle: usize = (1..columns - 1).map(|i| widest(i) + GAP).sum();
        let cap = width.saturating_sub(middle + GAP + MIN_LAST);
        // The widest id that fits the cap sets the column; longer ones
        // take a line of their own.
        let first = std::iter::once(&self.header)
            .chain(&self.rows)
            .filter_map(|r| r.first())
            .map(len)
            .filter(|l| *l <= cap)
            .max()
            .unwrap_or(0)
            .max(len(&self.header[0]));
        (
            Some(first),
            Some(width.saturating_sub(middle + first + GAP)),
        )
    }

    /// The table's lines, without trailing spaces.
    pub fn lines(&self) -> Vec<String> {
        let (first, last) = self.fitted();
        let mut table = Table::new();
        table.load_preset(presets::NOTHING);
        table.set_content_arrangement(ContentArrangement::Disabled);
        let long = |cells: &[String]| match (first, cells.first()) {
            (Some(w), Some(id)) if id.chars().count() > w => Some(id.clone()),
            _ => None,
        };
        let fit = |cells: &[String]| {
            let n = cells.len();
            let own_line = long(cells).is_some();
            Row::from(cells.iter().enumerate().map(|(i, cell)| {
                let text = match (i, last) {
                    (0, _) if own_line => String::new(),
                    (i, Some(w)) if i + 1 == n && n > 1 => cut(cell, w),
                    _ => cell.clone(),
                };
                Cell::new(text).set_alignment(CellAlignment::Left)
            }))
        };
        table.set_header(fit(&self.header));
        for row in &self.rows {
            table.add_row(fit(row));
        }
        let columns = self.header.len();
        for (i, column) in table.column_iter_mut().enumerate() {
            column.set_padding((0, if i + 1 == columns { 0 } else { GAP as u16 }));
            if i == 0
                && let Some(w) = first
            {
                let w = u16::try_from(w).unwrap_or(u16::MAX);
                column.set_constraint(comfy_table::ColumnConstraint::Absolute(
                    comfy_table::Width::Fixed(w + GAP as u16),
                ));
            }
        }
        // One rendered line per row (cells are single lines): the long ids'
        // own lines go before their rows.
        let mut out = Vec::new();
        let mut rows = std::iter::once(&self.header).chain(&self.rows);
        for line in table.lines() {
            if let Some(id) = rows.next().and_then(|r| long(r)) {
                out.push(id);
            }
            out.push(line.trim_end().to_owned());
        }
        out
    }

    /// Prints it to stdout, the titles in bold where colour may be used
    /// ([`colour`]).
    pub fn print(&self) {
        let bold = colour(&std::io::stdout());
        for (i, line) in self.lines().into_iter().enumerate() {
            if i == 0 && bold {
                println!("\x1b[1m{line}\x1b[0m");
            } else {
                println!("{line}");
            }
        }
    }
}

/// `text` cut to `width` characters, the last one `…` when cut.
fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let kept: String = text.chars().take(width.saturating_sub(1)).collect();
    format!("{}…", kept.trim_end())
}

/// The width rows are fitted to, if any.
fn output_width() -> Option<u16> {
    let stdout = std::io::stdout();
    if stdout.is_terminal()
        && let Ok(size) = rustix::termios::tcgetwinsize(&stdout)
        && size.ws_col > 0
    {
        return Some(size.ws_col);
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<u16>().ok())
        .filter(|c| *c >= 20)
}

/// Whether output on `stream` may be coloured: it is a terminal and
/// `NO_COLOR` is unset or empty.
pub fn colour(stream: &impl std::io::IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_id_takes_its_own_line_and_the_last_column_is_cut_to_the_width() {
        let mut text = TextTable::with_width(&["id", "effect", "description"], Some(80));
        let id = format!("mcp__{}__search", "x".repeat(47));
        assert_eq!(id.len(), 60);
        text.row([id.as_str(), "read_only", &"word ".repeat(40)]);
        text.row(["core__read_file", "read_only", "Read a file."]);
        let lines = text.lines();
        assert!(lines.iter().all(|l| l.chars().count() <= 80), "{lines:#?}");
        assert!(lines[0].starts_with("ID "), "{lines:#?}");
        assert_eq!(lines[1], id, "{lines:#?}");
        let effect_at = lines[0].find("EFFECT").unwrap();
        assert_eq!(
            lines[2].get(effect_at..effect_at + 9),
            Some("read_only"),
            "{lines:#?}"
        );
        assert!(
            lines[2].starts_with("   ") && lines[2].ends_with('…'),
            "{lines:#?}"
        );
        assert!(lines[3].starts_with("core__read_file  "), "{lines:#?}");
        assert_eq!(
            lines[3].get(effect_at..effect_at + 9),
            Some("read_only"),
            "{lines:#?}"
        );
        assert_eq!(lines.len(), 4);
    }

    #[test]
    fn without_a_width_rows_are_whole() {
        let mut text = TextTable::with_width(&["id", "description"], None);
        let long = "word ".repeat(40);
        text.row(["a", long.trim_end()]);
        assert!(text.lines()[1].ends_with("word word"), "{:?}", text.lines());
    }
}
