//! Tool ids of MCP tools: `mcp__<server>__<tool>`, with a reversible mapping for
//! tool names that do not fit.

use std::collections::BTreeMap;

use ai_core::{ToolId, tool::MAX_TOOL_ID_LEN};
use sha2::{Digest, Sha256};

/// Hex digits of the hash suffix a mapped name gets.
const SUFFIX_HEX: usize = 8;

/// The id part for an MCP tool name, and whether it had to be mapped: names outside
/// `[a-zA-Z0-9_-]`, starting with `_`, or too long for the 64-character id keep
/// their allowed characters (others become `_`), are cut to fit, and end in `_` and
/// eight hex digits of the sha256 of the original name.
pub fn id_name(server: &str, name: &str) -> (String, bool) {
    let budget = MAX_TOOL_ID_LEN.saturating_sub("mcp____".len() + server.len());
    let fits = !name.is_empty()
        && !name.starts_with('_')
        && name.len() <= budget
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if fits {
        return (name.to_owned(), false);
    }
    let mut sanitized: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let trimmed = sanitized.trim_start_matches('_').len();
    sanitized = sanitized.split_off(sanitized.len() - trimmed);
    if sanitized.is_empty() {
        sanitized.push('t');
    }
    let room = budget.saturating_sub(SUFFIX_HEX + 1).max(1);
    sanitized.truncate(room);
    let digest = Sha256::digest(name.as_bytes());
    let suffix = hex::encode(&digest[..SUFFIX_HEX / 2]);
    (format!("{sanitized}_{suffix}"), true)
}

/// Two tool names of one server that map to the same id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("mcp server `{server}`: tools `{first}` and `{second}` both map to id `{id}`")]
pub struct IdCollision {
    /// Server id.
    pub server: String,
    /// The first tool name.
    pub first: String,
    /// The second tool name.
    pub second: String,
    /// The id both map to.
    pub id: String,
}

/// The reversible table of one server: tool id -> the tool's name on the server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameTable {
    by_id: BTreeMap<String, String>,
}

impl NameTable {
    /// Maps every name of `server`, failing on the first collision.
    pub fn build<'a>(
        server: &str,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<(Self, Vec<(ToolId, String)>), IdCollision> {
        let mut by_id: BTreeMap<String, String> = BTreeMap::new();
        let mut ids = Vec::new();
        for name in names {
            let (part, _) = id_name(server, name);
            let id = ToolId::mcp(server, &part).map_err(|e| IdCollision {
                server: server.to_owned(),
                first: name.to_owned(),
                second: name.to_owned(),
                id: e.to_string(),
            })?;
            if let Some(first) = by_id.get(id.as_str()) {
                return Err(IdCollision {
                    server: server.to_owned(),
                    first: first.clone(),
                    second: name.to_owned(),
                    id: id.as_str().to_owned(),
                });
            }
            by_id.insert(id.as_str().to_owned(), name.to_owned());
            ids.push((id, name.to_owned()));
        }
        Ok((Self { by_id }, ids))
    }

    /// The server's name of a tool id.
    pub fn name(&self, id: &str) -> Option<&str> {
        self.by_id.get(id).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_kept() {
        assert_eq!(id_name("notes", "search"), ("search".into(), false));
        assert_eq!(id_name("notes", "get-page_2"), ("get-page_2".into(), false));
    }

    #[test]
    fn other_names_are_mapped_with_a_hash_suffix_and_stay_valid_ids() {
        for name in [
            "notes.search/v2",
            "_private",
            "ünïcode",
            "___",
            "a b",
            &"x".repeat(200),
        ] {
            let (part, mapped) = id_name("notes", name);
            assert!(mapped, "{name}");
            let id = ToolId::mcp("notes", &part).unwrap();
            assert!(id.as_str().len() <= MAX_TOOL_ID_LEN, "{id}");
            assert_eq!(id.server(), Some("notes"));
        }
        let (part, _) = id_name("notes", "notes.search/v2");
        assert!(part.starts_with("notes_search_v2_"), "{part}");
    }

    #[test]
    fn the_table_reverses_ids_and_refuses_collisions() {
        let (table, ids) = NameTable::build("s", ["a.b", "a_b", "plain"]).unwrap();
        for (id, name) in &ids {
            assert_eq!(table.name(id.as_str()), Some(name.as_str()));
        }
        let error = NameTable::build("s", ["dup", "dup"]).unwrap_err();
        assert_eq!(error.first, "dup");
        assert!(error.to_string().contains("mcp__s__dup"), "{error}");
    }

    #[test]
    fn long_server_ids_still_leave_room() {
        let server = "abcdefghijklmnop";
        let (part, _) = id_name(server, &"n".repeat(60));
        assert!(ToolId::mcp(server, &part).is_ok(), "{part}");
    }
}
