//! The file tools: `core__read_file`, `core__list_directory`, `core__write_file` and
//! `core__edit_file`.
//!
//! They reach files only through [`Workspace`]; the model's path is passed through
//! as given and the workspace adapter resolves it inside the sandbox. Messages never
//! echo a path.

use std::sync::Arc;

use ai_core::{
    ToolEffect,
    tool::{ModelView, Redaction, ToolCallContext, ToolErrorCode, ToolFailure},
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Namespace;
use crate::capability::{EntryKind, Workspace, WorkspaceError};
use crate::contract::ToolContract;

/// Default largest file `read_file` and `edit_file` accept (1 MiB).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Deepest `list_directory` recursion.
pub const MAX_LIST_DEPTH: u32 = 8;
/// Most entries `list_directory` returns.
pub const MAX_LIST_ENTRIES: u32 = 1000;
const DEFAULT_LIST_ENTRIES: u32 = 200;

/// Maps a workspace error to a tool failure with a safe message.
pub(crate) fn workspace_failure(error: WorkspaceError) -> ToolFailure {
    let code = match error {
        WorkspaceError::Denied | WorkspaceError::Protected => ToolErrorCode::PermissionDenied,
        WorkspaceError::NotFound => ToolErrorCode::NotFound,
        // The model named the wrong kind of thing or too much: its arguments, not the
        // tool, are at fault, and the message says what to do instead.
        WorkspaceError::NotAFile
        | WorkspaceError::NotADirectory
        | WorkspaceError::SpecialFile
        | WorkspaceError::TooLarge { .. } => ToolErrorCode::InvalidArgs,
        WorkspaceError::Io(_) => ToolErrorCode::ExecutionFailed,
    };
    ToolFailure::new(code, error.to_string())
}

fn redaction(args: &[&str], output: &[&str]) -> Redaction {
    Redaction::new(args, output).unwrap_or_default()
}

/// Decodes file bytes as text, refusing binary content.
fn as_text(bytes: Vec<u8>) -> Result<String, ToolFailure> {
    let binary = || {
        ToolFailure::new(
            ToolErrorCode::ExecutionFailed,
            "the file looks binary (NUL bytes or invalid UTF-8); only text files can be read",
        )
    };
    if bytes.contains(&0) {
        return Err(binary());
    }
    String::from_utf8(bytes).map_err(|_| binary())
}

/// Arguments of `core__read_file`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// Path relative to the workspace root.
    pub path: String,
    /// First line to return, 1-based (default 1).
    #[serde(default)]
    pub offset: Option<u64>,
    /// Most lines to return (default: all).
    #[serde(default)]
    pub limit: Option<u64>,
}

/// Output of `core__read_file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct FileContent {
    /// The path as given.
    pub path: String,
    /// The selected lines.
    pub content: String,
    /// First line returned, 1-based.
    pub start_line: u64,
    /// Number of lines returned.
    pub lines: u64,
    /// Lines in the whole file.
    pub total_lines: u64,
    /// Whether lines remain after the returned ones.
    pub more: bool,
}

/// Reads a text file in the workspace.
#[derive(Debug, Clone, Copy)]
pub struct ReadFile {
    /// Largest file read, in bytes.
    pub max_bytes: u64,
}

impl Default for ReadFile {
    fn default() -> Self {
        Self {
            max_bytes: DEFAULT_MAX_FILE_BYTES,
        }
    }
}

impl ToolContract for ReadFile {
    type Args = ReadFileArgs;
    type Output = FileContent;
    type Capabilities = Arc<dyn Workspace>;

    fn namespace(&self) -> Namespace {
        Namespace::core()
    }

    fn name(&self) -> &str {
        "read_file"
    }

    fn description(&self) -> &str {
        "Read a text file in the workspace. Optional offset (1-based first line) and limit (line count) select a range. Binary and oversized files are refused."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    fn redaction(&self) -> Redaction {
        redaction(
            &["path", "offset", "limit"],
            &["path", "start_line", "lines", "total_lines", "more"],
        )
    }

    async fn execute(
        &self,
        ws: &Arc<dyn Workspace>,
        _cx: &ToolCallContext,
        args: ReadFileArgs,
    ) -> Result<FileContent, ToolFailure> {
        let bytes = ws
            .read(args.path.clone(), self.max_bytes)
            .await
            .map_err(workspace_failure)?;
        let text = as_text(bytes)?;
        let all: Vec<&str> = text.split_inclusive('\n').collect();
        let total = all.len() as u64;
        let start = args.offset.unwrap_or(1).max(1);
        let skip = usize::try_from(start - 1).unwrap_or(usize::MAX);
        let take = args
            .limit
            .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
        let selected: Vec<&str> = all.iter().skip(skip).take(take).copied().collect();
        let lines = selected.len() as u64;
        Ok(FileContent {
            path: args.path,
            content: selected.concat(),
            start_line: start,
            lines,
            total_lines: total,
            more: (start - 1).saturating_add(lines) < total,
        })
    }
}

/// Arguments of `core__list_directory`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDirectoryArgs {
    /// Directory relative to the workspace root (default `.`, the root).
    #[serde(default)]
    pub path: Option<String>,
    /// Levels to descend, 1 to 8 (default 1: direct children only).
    #[serde(default)]
    pub depth: Option<u32>,
    /// Most entries to return, 1 to 1000 (default 200).
    #[serde(default)]
    pub max_entries: Option<u32>,
}

/// One listed entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ListedEntry {
    /// Path relative to the listed directory.
    pub path: String,
    /// File, dir, symlink (not followed) or other.
    pub kind: EntryKind,
    /// Size in bytes, for files.
    pub size: Option<u64>,
}

/// Output of `core__list_directory`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct DirectoryListing {
    /// The directory as given.
    pub path: String,
    /// Entries in stable order (depth-first, sorted by name).
    pub entries: Vec<ListedEntry>,
    /// Whether the entry cap cut the listing short.
    pub truncated: bool,
}

/// Lists a directory of the workspace.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListDirectory;

impl ToolContract for ListDirectory {
    type Args = ListDirectoryArgs;
    type Output = DirectoryListing;
    type Capabilities = Arc<dyn Workspace>;

    fn namespace(&self) -> Namespace {
        Namespace::core()
    }

    fn name(&self) -> &str {
        "list_directory"
    }

    fn description(&self) -> &str {
        "List a workspace directory, optionally recursively (depth up to 8), in stable order. Says when the entry cap truncated the listing. Symlinks are not followed."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    fn redaction(&self) -> Redaction {
        redaction(
            &["path", "depth", "max_entries"],
            &[
                "path",
                "entries.path",
                "entries.kind",
                "entries.size",
                "truncated",
            ],
        )
    }

    async fn execute(
        &self,
        ws: &Arc<dyn Workspace>,
        _cx: &ToolCallContext,
        args: ListDirectoryArgs,
    ) -> Result<DirectoryListing, ToolFailure> {
        let path = args.path.unwrap_or_else(|| ".".to_owned());
        let depth = args.depth.unwrap_or(1).clamp(1, MAX_LIST_DEPTH);
        let cap = args
            .max_entries
            .unwrap_or(DEFAULT_LIST_ENTRIES)
            .clamp(1, MAX_LIST_ENTRIES);
        let listing = ws
            .list(path.clone(), depth, cap as usize)
            .await
            .map_err(workspace_failure)?;
        Ok(DirectoryListing {
            path,
            entries: listing
                .entries
                .into_iter()
                .map(|e| ListedEntry {
                    path: e.path,
                    kind: e.kind,
                    size: e.size,
                })
                .collect(),
            truncated: listing.truncated,
        })
    }

    fn model_view(&self, output: &DirectoryListing) -> ModelView {
        let mut text = String::new();
        for e in &output.entries {
            let suffix = match e.kind {
                EntryKind::Dir => "/",
                EntryKind::Symlink => "@",
                _ => "",
            };
            text.push_str(&e.path);
            text.push_str(suffix);
            if let Some(size) = e.size {
                text.push_str(&format!("  ({size} bytes)"));
            }
            text.push('\n');
        }
        if output.entries.is_empty() {
            text.push_str("(empty directory)\n");
        }
        if output.truncated {
            text.push_str(&format!(
                "[listing truncated after {} entries; list a subdirectory or raise max_entries]\n",
                output.entries.len()
            ));
        }
        ModelView::Text(text)
    }
}

/// Arguments of `core__write_file`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFileArgs {
    /// Path relative to the workspace root; missing parent folders are created.
    pub path: String,
    /// The whole new content.
    pub content: String,
}

/// Output of `core__write_file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct WriteOutcome {
    /// The path as given.
    pub path: String,
    /// Bytes written.
    pub bytes_written: u64,
    /// Whether the file is new.
    pub created: bool,
}

/// Writes a whole file in the workspace, atomically.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFile;

impl ToolContract for WriteFile {
    type Args = WriteFileArgs;
    type Output = WriteOutcome;
    type Capabilities = Arc<dyn Workspace>;

    fn namespace(&self) -> Namespace {
        Namespace::core()
    }

    fn name(&self) -> &str {
        "write_file"
    }

    fn description(&self) -> &str {
        "Create or overwrite a text file in the workspace with the given content, atomically. Missing parent folders inside the workspace are created."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::StateChange
    }

    fn redaction(&self) -> Redaction {
        redaction(&["path"], &["path", "bytes_written", "created"])
    }

    async fn execute(
        &self,
        ws: &Arc<dyn Workspace>,
        _cx: &ToolCallContext,
        args: WriteFileArgs,
    ) -> Result<WriteOutcome, ToolFailure> {
        let bytes = args.content.into_bytes();
        let len = bytes.len() as u64;
        let existed = ws
            .write(args.path.clone(), bytes)
            .await
            .map_err(workspace_failure)?;
        Ok(WriteOutcome {
            path: args.path,
            bytes_written: len,
            created: !existed,
        })
    }
}

/// Arguments of `core__edit_file`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditFileArgs {
    /// Path relative to the workspace root.
    pub path: String,
    /// Exact text to replace (must not be empty).
    pub old: String,
    /// Replacement text.
    pub new: String,
    /// Replace every occurrence; otherwise `old` must occur exactly once.
    #[serde(default)]
    pub replace_all: Option<bool>,
}

/// Output of `core__edit_file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct EditOutcome {
    /// The path as given.
    pub path: String,
    /// How many occurrences were replaced.
    pub replacements: u64,
}

/// Replaces exact text in a workspace file, atomically.
#[derive(Debug, Clone, Copy)]
pub struct EditFile {
    /// Largest file edited, in bytes, before and after the edit (an edit that would
    /// grow the file past it is refused).
    pub max_bytes: u64,
}

impl Default for EditFile {
    fn default() -> Self {
        Self {
            max_bytes: DEFAULT_MAX_FILE_BYTES,
        }
    }
}

impl ToolContract for EditFile {
    type Args = EditFileArgs;
    type Output = EditOutcome;
    type Capabilities = Arc<dyn Workspace>;

    fn namespace(&self) -> Namespace {
        Namespace::core()
    }

    fn name(&self) -> &str {
        "edit_file"
    }

    fn description(&self) -> &str {
        "Replace an exact text `old` with `new` in a workspace file. Fails if `old` occurs zero or several times, unless replace_all is true. Atomic."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::StateChange
    }

    fn redaction(&self) -> Redaction {
        redaction(&["path", "replace_all"], &["path", "replacements"])
    }

    async fn execute(
        &self,
        ws: &Arc<dyn Workspace>,
        _cx: &ToolCallContext,
        args: EditFileArgs,
    ) -> Result<EditOutcome, ToolFailure> {
        if args.old.is_empty() {
            return Err(ToolFailure::new(
                ToolErrorCode::InvalidArgs,
                "`old` must not be empty",
            ));
        }
        let bytes = ws
            .read(args.path.clone(), self.max_bytes)
            .await
            .map_err(workspace_failure)?;
        let text = as_text(bytes)?;
        let count = text.matches(args.old.as_str()).count() as u64;
        let replace_all = args.replace_all.unwrap_or(false);
        if count == 0 {
            return Err(ToolFailure::new(
                ToolErrorCode::ExecutionFailed,
                "`old` does not occur in the file; nothing was changed",
            ));
        }
        if count > 1 && !replace_all {
            return Err(ToolFailure::new(
                ToolErrorCode::ExecutionFailed,
                format!(
                    "`old` occurs {count} times; make it unique or set replace_all; nothing was changed"
                ),
            ));
        }
        let updated = text.replace(args.old.as_str(), &args.new);
        if updated.len() as u64 > self.max_bytes {
            return Err(ToolFailure::new(
                ToolErrorCode::InvalidArgs,
                format!(
                    "the edited file would be larger than the {} byte limit; nothing was changed",
                    self.max_bytes
                ),
            ));
        }
        ws.write(args.path.clone(), updated.into_bytes())
            .await
            .map_err(workspace_failure)?;
        Ok(EditOutcome {
            path: args.path,
            replacements: count,
        })
    }
}
