//! The built-in tools (ids `core__*`).
//!
//! Each is a [`ToolContract`](crate::ToolContract) that reaches IO only through the
//! capability traits of [`crate::capability`]; `bootstrap` binds them to real
//! adapters.

mod files;
mod memory;
mod search;
mod shell;
mod time;
mod web;

use ai_core::ToolSpec;

use crate::contract::{ContractError, to_tool_spec};

pub use files::{
    DEFAULT_MAX_FILE_BYTES, DirectoryListing, EditFile, EditFileArgs, EditOutcome, FileContent,
    ListDirectory, ListDirectoryArgs, ListedEntry, MAX_LIST_DEPTH, MAX_LIST_ENTRIES, ReadFile,
    ReadFileArgs, WriteFile, WriteFileArgs, WriteOutcome,
};
pub use memory::{
    DEFAULT_NAMESPACE, MAX_KEY_LEN, MAX_RESULTS, MAX_TAGS, MemoryEntries, MemoryEntry, MemoryRead,
    MemoryReadArgs, MemoryWrite, MemoryWriteArgs, MemoryWriteCapabilities, MemoryWritten,
};
pub use search::{
    DEFAULT_SEARCH_BYTES, DEFAULT_SEARCH_RESULTS, DEFAULT_SEARCH_TIMEOUT, MAX_QUERY_CHARS,
    MAX_RESULT_URL_CHARS, MAX_SEARCH_RESULTS, MAX_SNIPPET_CHARS, MAX_TITLE_CHARS, WebSearch,
    WebSearchArgs, WebSearchResult, WebSearchResults, bound_hits,
};
pub use shell::{
    DEFAULT_SHELL_OUTPUT_BYTES, DEFAULT_SHELL_TIMEOUT, ExecShell, ExecShellArgs, ShellResult,
    is_denied,
};
pub use time::{CurrentTime, GetCurrentTime, GetCurrentTimeArgs};
pub use web::{
    DEFAULT_FETCH_BYTES, DEFAULT_FETCH_TIMEOUT, WebFetch, WebFetchArgs, WebPage, decode_entities,
    html_to_text, html_to_text_cancellable,
};

/// The specs of every built-in tool with default settings, sorted by id (for display;
/// binding needs capabilities and happens in `bootstrap`). `core__web_search` is
/// among them, though an application binds it only when a search provider is
/// configured.
pub fn specs() -> Result<Vec<ToolSpec>, ContractError> {
    let mut specs = vec![
        to_tool_spec(&GetCurrentTime)?,
        to_tool_spec(&ReadFile::default())?,
        to_tool_spec(&ListDirectory)?,
        to_tool_spec(&WriteFile)?,
        to_tool_spec(&EditFile::default())?,
        to_tool_spec(&ExecShell::default())?,
        to_tool_spec(&WebFetch::default())?,
        to_tool_spec(&WebSearch::default())?,
        to_tool_spec(&MemoryWrite)?,
        to_tool_spec(&MemoryRead)?,
    ];
    specs.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(specs)
}
