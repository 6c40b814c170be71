//! The per-request tool catalog: the only tools a model is shown.

use std::collections::HashMap;

use crate::context::RunContext;
use crate::policy::{PolicyDecision, ToolPolicy};
use crate::schema::{SchemaViolation, check_schema_subset};
use crate::tool::ToolId;
use crate::tool::ToolSpec;

/// Why a catalog (or a runner's tool set) could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// Two specs have the same id.
    #[error("tool id `{id}` is defined twice: by {first} and by {second}")]
    Collision {
        /// The duplicated id.
        id: ToolId,
        /// Origin of the first spec.
        first: String,
        /// Origin of the second spec.
        second: String,
    },
    /// A spec's input schema leaves the P0 subset.
    #[error(
        "tool `{id}` has a schema outside the supported subset: {}",
        join(violations)
    )]
    SchemaSubset {
        /// The tool.
        id: ToolId,
        /// Every violation, with its JSON pointer.
        violations: Vec<SchemaViolation>,
    },
    /// A spec's schema is not a valid JSON Schema.
    #[error("tool `{id}` has an invalid {which} schema: {message}")]
    InvalidSchema {
        /// The tool.
        id: ToolId,
        /// `input` or `output`.
        which: &'static str,
        /// Validator compile error.
        message: String,
    },
}

fn join(violations: &[SchemaViolation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Rejects duplicate ids, naming both origins.
pub(crate) fn check_collisions<'a>(
    specs: impl IntoIterator<Item = &'a ToolSpec>,
) -> Result<(), CatalogError> {
    let mut seen: HashMap<&str, &ToolSpec> = HashMap::new();
    for spec in specs {
        if let Some(first) = seen.insert(spec.id.as_str(), spec) {
            return Err(CatalogError::Collision {
                id: spec.id.clone(),
                first: first.origin.clone(),
                second: spec.origin.clone(),
            });
        }
    }
    Ok(())
}

pub(crate) fn check_subset(spec: &ToolSpec) -> Result<(), CatalogError> {
    check_schema_subset(&spec.input_schema).map_err(|violations| CatalogError::SchemaSubset {
        id: spec.id.clone(),
        violations,
    })
}

/// The tools one request may show the model: allowed by policy (allowed outright or
/// behind an approval), in stable id order so prompts are deterministic.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolCatalog {
    specs: Vec<ToolSpec>,
    index: HashMap<String, usize>,
}

impl ToolCatalog {
    /// Builds a catalog from `specs` under `policy`.
    ///
    /// Fails on an id defined twice (naming both origins) or on a schema outside the
    /// P0 subset. Denied tools are left out; tools that need approval are kept (this
    /// catalog knows no approver: [`crate::ToolRunner::catalog`] also leaves them out
    /// when its runner has none).
    pub fn build(
        specs: impl IntoIterator<Item = ToolSpec>,
        policy: &ToolPolicy,
        ctx: &RunContext,
    ) -> Result<Self, CatalogError> {
        let specs: Vec<ToolSpec> = specs.into_iter().collect();
        check_collisions(&specs)?;
        specs.iter().try_for_each(check_subset)?;
        Ok(Self::allowed(specs.iter(), policy, ctx, true))
    }

    /// The specs policy does not deny (and, unless `with_approval`, does not put
    /// behind an approval), without re-checking them (for specs that were already
    /// checked, such as a runner's).
    pub(crate) fn allowed<'a>(
        specs: impl IntoIterator<Item = &'a ToolSpec>,
        policy: &ToolPolicy,
        ctx: &RunContext,
        with_approval: bool,
    ) -> Self {
        Self::from_sorted(
            specs
                .into_iter()
                .filter(|spec| match policy.decide(ctx, &spec.id, spec.effect) {
                    PolicyDecision::Allow => true,
                    PolicyDecision::RequireApproval => with_approval,
                    PolicyDecision::Deny => false,
                })
                .cloned()
                .collect(),
        )
    }

    fn from_sorted(mut specs: Vec<ToolSpec>) -> Self {
        specs.sort_by(|a, b| a.id.cmp(&b.id));
        let index = specs
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.as_str().to_owned(), i))
            .collect();
        Self { specs, index }
    }

    /// An empty catalog (no tools offered).
    pub fn empty() -> Self {
        Self::default()
    }

    /// Keeps only the tools whose spec satisfies `keep` (e.g. a graph's tool
    /// selection, by id or effect), in one pass without copying a spec.
    pub fn select(self, mut keep: impl FnMut(&ToolSpec) -> bool) -> Self {
        Self::from_sorted(self.specs.into_iter().filter(|s| keep(s)).collect())
    }

    /// The specs, sorted by id.
    pub fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    /// The spec with this id, if offered.
    pub fn get(&self, id: &str) -> Option<&ToolSpec> {
        self.index.get(id).map(|&i| &self.specs[i])
    }

    /// Whether a tool with this id is offered.
    pub fn contains(&self, id: &str) -> bool {
        self.index.contains_key(id)
    }

    /// Number of tools offered.
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// Whether no tool is offered.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }
}
