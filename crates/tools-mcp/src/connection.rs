//! Credentials by connection id (invariant CONNECTION_ID_ONLY): the config names a
//! connection, a broker resolves it when a server is connected, and the secret
//! never sits in tool context, events, logs, errors or `Debug` output.

/// A secret value. Its `Debug` prints no part of it; it has no `Display` and no
/// `Serialize`, so it cannot reach an event or a log by accident.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// A resolved credential.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Credential {
    /// Sent as `Authorization: Bearer <secret>`.
    Bearer(Secret),
}

/// Why a connection did not resolve. Messages name the connection and where its
/// secret was looked for, never the secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionError {
    /// No `[connections.NAME]`.
    #[error("connection `{0}` is not configured")]
    Unknown(String),
    /// The secret's source is empty or missing.
    #[error("connection `{connection}`: {message}")]
    Unavailable {
        /// The connection.
        connection: String,
        /// What is missing (e.g. "environment variable NOTES_TOKEN is not set").
        message: String,
    },
}

/// Resolves connection ids to credentials, at connect time (so a rotated secret is
/// picked up by the next reconnect). Implemented by the composition root.
pub trait ConnectionBroker: Send + Sync {
    /// The credential of `connection`.
    fn resolve(&self, connection: &str) -> Result<Credential, ConnectionError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_secret() {
        let credential = Credential::Bearer(Secret::new("s3cret-token"));
        let shown = format!("{credential:?} {:?}", Secret::new("s3cret-token"));
        assert!(!shown.contains("s3cret"), "{shown}");
    }
}

/// What the process that runs the servers gives them: credentials on demand, and
/// the variables a stdio server inherits (the caller reads its own environment;
/// tools-mcp reads none).
#[derive(Clone, Default)]
pub struct ServerHost {
    /// Resolves a server's `connection` when it connects (`None`: no connections).
    pub broker: Option<std::sync::Arc<dyn ConnectionBroker>>,
    /// The caller's values of [`crate::INHERITED_ENV`] (see [`crate::inherited_env`]).
    pub inherited_env: Vec<(String, std::ffi::OsString)>,
}

impl std::fmt::Debug for ServerHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.inherited_env.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("ServerHost")
            .field("broker", &self.broker.is_some())
            .field("inherited_env", &names)
            .finish()
    }
}
