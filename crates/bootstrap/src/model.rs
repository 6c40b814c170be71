//! Picks the model: the OpenAI-compatible client when a base URL is configured, the
//! embedded test model otherwise (announced on stderr).

use std::sync::Arc;
use std::time::Duration;

use agent_testing::TestModel;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ConfigSource, FileConfig};

    fn config(base_url: Option<&str>) -> AgentConfig {
        let mut file = FileConfig::default();
        file.model.base_url = base_url.map(str::to_owned);
        file.model.include_usage = false;
        file.model.first_byte_timeout_ms = 1234;
        file.model
            .extra_headers
            .insert("X-Team".into(), "research".into());
        AgentConfig {
            file,
            api_key: Some("sk-test".into()),
            workspace_root: std::env::temp_dir(),
            source: ConfigSource::Defaults,
        }
    }

    #[test]
    fn no_base_url_means_no_client() {
        assert!(client_config(&config(None)).is_none());
    }

    #[test]
    fn file_settings_reach_the_client() {
        let client = client_config(&config(Some("http://127.0.0.1:1/v1"))).unwrap();
        assert_eq!(client.base_url, "http://127.0.0.1:1/v1");
        assert!(client.api_key.is_some());
        assert!(!format!("{client:?}").contains("sk-test"));
        assert_eq!(
            client.extra_headers,
            vec![("X-Team".to_owned(), "research".to_owned())]
        );
        assert_eq!(client.timeouts.first_byte, Duration::from_millis(1234));
        assert!(!client.encode.include_usage);
        assert_eq!(
            client.deltas,
            wire_openai::decode::DeltaMode::SkipArgFragments
        );
    }
}
