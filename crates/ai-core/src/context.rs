//! Correlation ids carried by a run.

use serde::{Deserialize, Serialize};

/// Identity of one run and the ids that correlate it with the request that caused
/// it. They come in with the request; no layer invents new ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunContext {
    /// Id of this run (every event carries it).
    pub run_id: String,
    /// Distributed trace id.
    pub trace_id: String,
    /// Id of the ingress request (HTTP request, CLI invocation) that started the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_request_id: Option<String>,
}

impl RunContext {
    /// A context with the given ids and no ingress request id.
    pub fn new(run_id: impl Into<String>, trace_id: impl Into<String>) -> Self {
        Self {
            run_id: run_id.into(),
            trace_id: trace_id.into(),
            ingress_request_id: None,
        }
    }

    /// A context whose run and trace ids are fresh UUIDs (for an ingress point that
    /// received none).
    pub fn generate() -> Self {
        let id = uuid::Uuid::now_v7().to_string();
        Self::new(id.clone(), id)
    }

    /// Sets the ingress request id.
    pub fn with_ingress_request_id(mut self, id: impl Into<String>) -> Self {
        self.ingress_request_id = Some(id.into());
        self
    }
}
