//! Capability traits: the only doors from a tool to the outside world.
//!
//! Each trait is small and object-safe. Real adapters live in `bootstrap`; in-memory
//! doubles for tests live here beside the traits.

mod clock;
mod http;
mod memory;
mod search;
mod shell;
mod workspace;

pub use clock::{Clock, FixedClock};
pub use http::{
    AllowlistError, BlockReason, FetchError, FetchRequest, FetchResponse, HttpFetch, NetAllowlist,
    check_address, classify, classify_v4, classify_v6, is_localhost_name,
};
pub use memory::{
    DEFAULT_MAX_ENTRIES_PER_NAMESPACE, MAX_NAMESPACE_LEN, MemoryError, MemoryHit, MemoryRecord,
    MemoryStore, MemoryStoreDouble, query_terms, validate_namespace,
};
pub use search::{SearchEngine, SearchError, SearchHit, SearchRequest};
pub use shell::{Shell, ShellError, ShellOutcome, ShellRequest};
pub use workspace::{DirEntry, DirListing, EntryKind, MemoryWorkspace, Workspace, WorkspaceError};
