//! The TLS configuration of the workspace's HTTP clients (the model client of
//! wire-openai, `web_fetch` in ai-host, MCP over streamable HTTP in tools-mcp).
//!
//! reqwest built with `rustls-no-provider` needs a rustls crypto provider and, when
//! none is given to the client, takes the process-wide default, panicking when there
//! is none. A library must not install that default for its user (it is one per
//! process, and the user may want another). So each client gets a ready
//! [`rustls::ClientConfig`] with its own ring provider, the platform's certificate
//! verifier (what reqwest itself uses: the operating system's roots), TLS 1.2 and
//! 1.3, SNI, and HTTP/1.1 by ALPN; pass it to
//! `reqwest::ClientBuilder::tls_backend_preconfigured`.
//!
//! client-tls depends on no project crate and makes no connection itself.

use std::sync::{Arc, OnceLock};

/// Why the configuration could not be built (the platform's roots could not be
/// loaded, for instance).
#[derive(Debug, Clone, thiserror::Error)]
#[error("TLS is unavailable: {0}")]
pub struct TlsError(String);

/// The client configuration, built once per process and cloned for each client
/// (the clones share the provider, the verifier and the session cache).
pub fn client_config() -> Result<rustls::ClientConfig, TlsError> {
    static CONFIG: OnceLock<Result<rustls::ClientConfig, TlsError>> = OnceLock::new();
    CONFIG.get_or_init(build).clone()
}

fn build() -> Result<rustls::ClientConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls_platform_verifier::Verifier::new(Arc::clone(&provider))
        .map_err(|e| TlsError(e.to_string()))?;
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_builds_without_a_process_default() {
        let config = client_config().unwrap();
        assert_eq!(config.alpn_protocols, [b"http/1.1".to_vec()]);
        assert!(config.enable_sni);
        assert!(
            rustls::crypto::CryptoProvider::get_default().is_none(),
            "no process-wide provider was installed"
        );
    }
}
