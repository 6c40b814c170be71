//! Tool patterns: an exact tool id, or a prefix ending in `*`.

use serde::{Deserialize, Serialize};

/// An exact tool id (`core__read_file`) or a prefix ending in `*` (`core__*`,
/// `mcp__github__*`; `*` alone matches every id). The one rule for every list of
/// tools: policy's `allow` and `deny`, a graph's tools, what trust compares.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ToolPattern(String);

impl ToolPattern {
    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The prefix of a `prefix*` pattern; `None` for an exact id.
    fn prefix(&self) -> Option<&str> {
        self.0.strip_suffix('*')
    }

    /// Whether `id` matches: it is the exact id, or starts with the prefix.
    pub fn matches(&self, id: &str) -> bool {
        match self.prefix() {
            Some(prefix) => id.starts_with(prefix),
            None => self.0 == id,
        }
    }

    /// Whether every id `other` matches is matched by this pattern too (`core__*`
    /// covers `core__read_file` and `core__read*`, not `*` or `cor*`).
    pub fn covers(&self, other: &ToolPattern) -> bool {
        match (self.prefix(), other.prefix()) {
            (Some(mine), Some(theirs)) => theirs.starts_with(mine),
            (Some(mine), None) => other.0.starts_with(mine),
            (None, Some(_)) => false,
            (None, None) => self.0 == other.0,
        }
    }
}

impl From<&str> for ToolPattern {
    fn from(pattern: &str) -> Self {
        Self(pattern.to_owned())
    }
}

impl From<String> for ToolPattern {
    fn from(pattern: String) -> Self {
        Self(pattern)
    }
}

impl std::fmt::Display for ToolPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching_and_covering() {
        let core = ToolPattern::from("core__*");
        assert!(core.matches("core__read_file") && !core.matches("app__x"));
        assert!(ToolPattern::from("*").matches("anything"));
        assert!(ToolPattern::from("app__x").matches("app__x"));
        assert!(!ToolPattern::from("app__x").matches("app__xy"));
        for covered in ["core__*", "core__read_file", "core__read*"] {
            assert!(core.covers(&covered.into()), "{covered}");
        }
        for wider in ["*", "cor*", "app__*", "mcp__x__y", "core_*", ""] {
            assert!(!core.covers(&wider.into()), "{wider}");
        }
    }
}
