//! Picks the model: the OpenAI-compatible client when a base URL is configured, the
//! embedded test model otherwise (announced on stderr).

use std::sync::Arc;
use std::time::Duration;

use agent_graph::testing::TestModel;
use ai_core::CompletionPort;
use wire_openai::client::{ClientConfig, OpenAiClient, Timeouts};

use crate::config::AgentConfig;

/// Why the model could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot set up the model client: {0}")]
pub struct ModelError(String);

/// The wire client configuration for `config`, or `None` when no endpoint is set.
pub fn client_config(config: &AgentConfig) -> Option<ClientConfig> {
    let m = &config.file.model;
    let base_url = m.base_url.as_ref()?;
    let mut client = ClientConfig::new(base_url.clone());
    if let Some(key) = &config.api_key {
        client = client.with_api_key(key.clone());
    }
    client.extra_headers = m.extra_headers.clone().into_iter().collect();
    client.timeouts = Timeouts {
        connect: Duration::from_millis(m.connect_timeout_ms),
        first_byte: Duration::from_millis(m.first_byte_timeout_ms),
        between_chunks: Duration::from_millis(m.between_chunks_timeout_ms),
    };
    client.max_retries = m.max_retries;
    // The loop shows text as it streams and takes tool calls only from the assembled
    // final, so per-fragment argument deltas would be allocated for nobody.
    client.deltas = wire_openai::decode::DeltaMode::SkipArgFragments;
    client.encode.include_usage = m.include_usage;
    if m.strict_tools {
        client.encode.strict = wire_openai::encode::StrictMode::WhenPossible;
    }
    Some(client)
}

/// Builds the completion port for `config`.
pub fn build(config: &AgentConfig) -> Result<Arc<dyn CompletionPort>, ModelError> {
    let Some(client) = client_config(config) else {
        eprintln!(
            "agent: no model endpoint configured (set OPENAI_BASE_URL, model.base_url or --base-url); using the embedded offline TestModel"
        );
        return Ok(Arc::new(TestModel::new()));
    };
    let client = OpenAiClient::new(client).map_err(|e| ModelError(e.to_string()))?;
    Ok(Arc::new(client))
}
