//! ARCHITECTURE.md's "Dependency rules" table, checked against `layers.toml`.
//!
//! The format read (tolerant of spacing, emphasis and extra columns):
//! - a Markdown heading (any level) whose text contains "Dependency rules" (any case);
//!   the first such heading is used;
//! - under it, before the next heading, a pipe table: a header row (its text is not
//!   read), a `|---|` separator row, then one row per `layers.toml` row, in any order;
//! - first cell: the row's `crate` exactly as `layers.toml` spells it (`wire-*`);
//! - second cell: its `may_depend_on`, as comma-separated names or patterns, `none`
//!   (also `-` or empty) or `any` (also `everything` or `*`);
//! - in both cells, backticks, surrounding `**`, a leading "and " in a list item and
//!   parenthesized remarks (`ai-core (types only)`) are ignored; further cells
//!   (must not depend on, notes) are free text.

use std::collections::{BTreeMap, BTreeSet};

use crate::layers::{Layers, list};

/// The file, relative to the workspace root.
pub(crate) const FILE: &str = "ARCHITECTURE.md";

/// What the heading of the table contains (compared case-insensitively).
const HEADING: &str = "dependency rules";

/// `text` without parenthesized remarks, backticks and surrounding `**`, trimmed.
fn clean(text: &str) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            '`' => {}
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    let trimmed = out.trim();
    let trimmed = trimmed
        .strip_prefix("**")
        .and_then(|t| t.strip_suffix("**"))
        .unwrap_or(trimmed);
    trimmed.trim().to_owned()
}

/// The cells of a table line (`| a | b |`), trimmed.
fn cells(line: &str) -> Vec<&str> {
    let line = line.trim();
    let line = line.strip_prefix('|').unwrap_or(line);
    let line = line.strip_suffix('|').unwrap_or(line);
    line.split('|').map(str::trim).collect()
}

/// Whether `line` is a table's separator row (`|---|:--:|`).
fn is_separator(line: &str) -> bool {
    let cells = cells(line);
    !cells.is_empty()
        && cells
            .iter()
            .all(|cell| cell.contains('-') && cell.chars().all(|c| matches!(c, '-' | ':' | ' ')))
}

/// A may-depend-on cell as a set of patterns (`*` alone for any).
fn depends(cell: &str) -> BTreeSet<String> {
    let cell = clean(cell);
    match cell.to_lowercase().as_str() {
        "" | "none" | "-" | "\u{2014}" => BTreeSet::new(),
        "any" | "everything" | "*" => BTreeSet::from(["*".to_owned()]),
        _ => cell
            .split(',')
            .map(|item| {
                let item = item.trim();
                item.strip_prefix("and ").unwrap_or(item).trim().to_owned()
            })
            .filter(|item| !item.is_empty())
            .collect(),
    }
}

/// A set of patterns as the table would say it.
fn say(set: &BTreeSet<String>) -> String {
    if set.is_empty() {
        "none".to_owned()
    } else if set.len() == 1 && set.contains("*") {
        "any".to_owned()
    } else {
        list(set)
    }
}

/// How ARCHITECTURE.md's `text` disagrees with `layers`: (1-based line, message)
/// pairs, in line order, then the rows the table lacks.
pub(crate) fn check(text: &str, layers: &Layers) -> Vec<(Option<usize>, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let is_heading = |line: &str| line.trim_start().starts_with('#');
    let Some(heading) = lines
        .iter()
        .position(|line| is_heading(line) && line.to_lowercase().contains(HEADING))
    else {
        return vec![(
            None,
            "no heading containing \"Dependency rules\" (layer-lint checks the table under it)"
                .to_owned(),
        )];
    };
    let start = lines[heading + 1..]
        .iter()
        .position(|line| is_heading(line) || line.trim_start().starts_with('|'))
        .map(|offset| heading + 1 + offset)
        .filter(|&index| !is_heading(lines[index]));
    let Some(start) = start else {
        return vec![(
            Some(heading + 1),
            "no table under the \"Dependency rules\" heading".to_owned(),
        )];
    };
    let table: Vec<(usize, &str)> = lines[start..]
        .iter()
        .take_while(|line| line.trim_start().starts_with('|'))
        .enumerate()
        .map(|(offset, line)| (start + offset + 1, *line))
        .collect();
    if table.len() < 2 || !is_separator(table[1].1) {
        return vec![(
            Some(start + 1),
            "the \"Dependency rules\" table needs a header row and a |---| separator row"
                .to_owned(),
        )];
    }

    let mut problems = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for &(line, row) in &table[2..] {
        let cells = cells(row);
        let (Some(first), Some(second)) = (cells.first(), cells.get(1)) else {
            problems.push((
                Some(line),
                "row has fewer than 2 cells (crate | may depend on)".to_owned(),
            ));
            continue;
        };
        let name = clean(first);
        if let Some(earlier) = seen.get(&name) {
            problems.push((
                Some(line),
                format!("row {name} appears twice (first at line {earlier})"),
            ));
            continue;
        }
        seen.insert(name.clone(), line);
        let Some(layer) = layers.rows.iter().find(|layer| layer.pattern == name) else {
            problems.push((Some(line), format!("row {name} is not a layers.toml row")));
            continue;
        };
        let said = depends(second);
        let want: BTreeSet<String> = layer.may_depend_on.iter().cloned().collect();
        if said != want {
            problems.push((
                Some(line),
                format!(
                    "row {name} says it may depend on {}; layers.toml says {}",
                    say(&said),
                    say(&want)
                ),
            ));
        }
    }
    for layer in &layers.rows {
        if !seen.contains_key(&layer.pattern) {
            problems.push((
                Some(start + 1),
                format!(
                    "the \"Dependency rules\" table has no row for {} (a layers.toml row)",
                    layer.pattern
                ),
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_cleaned() {
        assert_eq!(clean(" **`wire-*`** "), "wire-*");
        assert_eq!(clean("integration-tests (`tests/`)"), "integration-tests");
        assert_eq!(
            depends("`ai-core`, and ai-tools (for bind)"),
            BTreeSet::from(["ai-core".to_owned(), "ai-tools".to_owned()])
        );
        assert_eq!(depends("Everything"), BTreeSet::from(["*".to_owned()]));
        assert_eq!(depends(" None "), BTreeSet::new());
        assert!(is_separator("|---|:---:| --- |"));
        assert!(!is_separator("| crate | may depend on |"));
    }

    #[test]
    fn a_missing_heading_or_table_is_reported() {
        let layers = crate::layers::Layers::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../layers.toml"),
        )
        .unwrap();
        assert_eq!(
            check("# Architecture\n\nno table\n", &layers),
            [(
                None,
                "no heading containing \"Dependency rules\" (layer-lint checks the table under it)"
                    .to_owned()
            )]
        );
        assert_eq!(
            check(
                "## Dependency rules\n\ntext\n\n## Next\n| a | b |\n",
                &layers
            ),
            [(
                Some(1),
                "no table under the \"Dependency rules\" heading".to_owned()
            )]
        );
    }
}
