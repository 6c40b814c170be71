//! Restate's ingress and admin API as a server and a worker use them, with no
//! SDK: submissions, awakeables, registration ([`RestateClient`]), the engine
//! a server submits its runs to ([`RestateEngine`]), and request identity keys.

use futures::future::BoxFuture;

use super::SERVICE;
use crate::engine::{Continuation, Engine, EngineError, RunInput, RunSummary};
use crate::seal::{DurableKey, Purpose, Sealed};

/// A request identity key pair for a Restate server: it signs every request
/// it sends a worker with the private key, and `agent worker` answers only
/// requests signed with a key whose public half it is given.
#[derive(Clone)]
pub struct IdentityKeyPair {
    /// The private key as PEM (PKCS#8), for the server's
    /// `request-identity-private-key-pem-file` (keep it private).
    pub private_pem: String,
    /// The public key as the SDK takes it (`publickeyv1_` and base58).
    pub public_key: String,
}

impl std::fmt::Debug for IdentityKeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityKeyPair")
            .field("public_key", &self.public_key)
            .finish_non_exhaustive()
    }
}

impl IdentityKeyPair {
    /// A fresh Ed25519 key pair.
    pub fn generate() -> Result<Self, String> {
        use base64::Engine;
        use ring::rand::SecureRandom;
        use ring::signature::KeyPair;
        let mut seed = [0u8; 32];
        ring::rand::SystemRandom::new()
            .fill(&mut seed)
            .map_err(|_| "no randomness".to_owned())?;
        let pair = ring::signature::Ed25519KeyPair::from_seed_unchecked(&seed)
            .map_err(|e| format!("not an Ed25519 seed: {e}"))?;
        // PKCS#8 v1 of an Ed25519 private key: this fixed header, then the seed.
        let mut der = hex::decode("302e020100300506032b657004220420").unwrap_or_default();
        der.extend_from_slice(&seed);
        let body = base64::engine::general_purpose::STANDARD.encode(&der);
        Ok(Self {
            private_pem: format!(
                "-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n"
            ),
            public_key: format!(
                "publickeyv1_{}",
                bs58::encode(pair.public_key().as_ref()).into_string()
            ),
        })
    }
}

/// `value` sealed for `purpose`, or the refusal to send it to `url`.
fn sealed<T: serde::Serialize>(
    url: &str,
    value: &T,
    purpose: Purpose,
    key: &DurableKey,
) -> Result<Sealed, RestateError> {
    Sealed::seal(value, purpose, key).map_err(|e| RestateError::Refused {
        url: url.to_owned(),
        status: 0,
        body: e.to_string(),
    })
}

/// Why Restate's ingress or admin API refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RestateError {
    /// The server could not be reached.
    #[error("Restate at {url} cannot be reached: {message}")]
    Unreachable {
        /// The endpoint (without credentials).
        url: String,
        /// What failed.
        message: String,
    },
    /// It answered with an error status.
    #[error("Restate answered {status} to {url}: {body}")]
    Refused {
        /// The endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of its answer.
        body: String,
    },
}

/// A client of a Restate server: its ingress (where runs are submitted) and its
/// admin API (where a worker registers).
#[derive(Debug, Clone)]
pub struct RestateClient {
    http: reqwest::Client,
    ingress: String,
    admin: String,
}

impl RestateClient {
    /// A client of the server whose ingress and admin API are at these URLs
    /// (`http://127.0.0.1:8080`, `http://127.0.0.1:9070` by default).
    pub fn new(ingress: &str, admin: &str) -> Result<Self, RestateError> {
        let unreachable = |message: String| RestateError::Unreachable {
            url: ingress.to_owned(),
            message,
        };
        let tls = client_tls::client_config().map_err(|e| unreachable(e.to_string()))?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .connect_timeout(std::time::Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| unreachable(e.to_string()))?;
        Ok(Self {
            http,
            ingress: ingress.trim_end_matches('/').to_owned(),
            admin: admin.trim_end_matches('/').to_owned(),
        })
    }

    /// Submits a run sealed with `key` without waiting for it, with its id as
    /// the idempotency key: the same run submitted again is not run again.
    pub async fn submit(&self, input: &RunInput, key: &DurableKey) -> Result<(), RestateError> {
        let url = format!("{}/{SERVICE}/run/send", self.ingress);
        let sealed = sealed(&url, input, Purpose::Run, key)?;
        self.post(&url, Some(input.start.run_id()), &sealed)
            .await
            .map(drop)
    }

    /// Runs a run sealed with `key` and waits for its summary, with its id as
    /// the idempotency key: a run submitted before answers with its first
    /// summary.
    pub async fn call(
        &self,
        input: &RunInput,
        key: &DurableKey,
    ) -> Result<RunSummary, RestateError> {
        let url = format!("{}/{SERVICE}/run", self.ingress);
        let sealed = sealed(&url, input, Purpose::Run, key)?;
        let body = self.post(&url, Some(input.start.run_id()), &sealed).await?;
        serde_json::from_str(&body).map_err(|e| RestateError::Refused {
            url,
            status: 200,
            body: format!("not a run summary: {e}"),
        })
    }

    /// Resolves the awakeable a paused run waits on with `next`, sealed with
    /// `key`: the run goes on with the user's decisions.
    pub async fn resolve(
        &self,
        awakeable: &str,
        next: &Continuation,
        key: &DurableKey,
    ) -> Result<(), RestateError> {
        let url = format!("{}/restate/awakeables/{awakeable}/resolve", self.ingress);
        let sealed = sealed(&url, next, Purpose::Continuation, key)?;
        self.post(&url, None, &sealed).await.map(drop)
    }

    /// Whether Restate's ingress answers (its health endpoint).
    pub async fn healthy(&self) -> bool {
        let url = format!("{}/restate/health", self.ingress);
        let request = self
            .http
            .get(&url)
            .timeout(std::time::Duration::from_secs(2));
        matches!(request.send().await, Ok(response) if response.status().is_success())
    }

    /// Registers the worker at `uri` (its services and handlers) with the admin
    /// API, replacing an earlier registration of the same address.
    pub async fn register(&self, uri: &str) -> Result<(), RestateError> {
        let url = format!("{}/deployments", self.admin);
        let body = serde_json::json!({"uri": uri, "force": true});
        self.post(&url, None, &body).await.map(drop)
    }

    async fn post(
        &self,
        url: &str,
        idempotency_key: Option<&str>,
        body: &impl serde::Serialize,
    ) -> Result<String, RestateError> {
        let mut request = self.http.post(url).json(body);
        if let Some(key) = idempotency_key {
            request = request.header("idempotency-key", key);
        }
        let unreachable = |e: reqwest::Error| RestateError::Unreachable {
            url: url.to_owned(),
            message: e.without_url().to_string(),
        };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let text = response.text().await.map_err(unreachable)?;
        if !status.is_success() {
            return Err(RestateError::Refused {
                url: url.to_owned(),
                status: status.as_u16(),
                body: text.chars().take(300).collect(),
            });
        }
        Ok(text)
    }
}

/// The engine on Restate (see [`crate::engine::Engine`]): submissions and
/// decisions sealed with the key the servers and workers share, sent to
/// Restate's ingress.
#[derive(Debug)]
pub struct RestateEngine {
    client: RestateClient,
    key: DurableKey,
}

impl RestateEngine {
    /// Submits through `client`, sealing with `key`.
    pub fn new(client: RestateClient, key: DurableKey) -> Self {
        Self { client, key }
    }
}

fn engine_error(error: RestateError) -> EngineError {
    match error {
        RestateError::Unreachable { .. } => EngineError::Unreachable(error.to_string()),
        RestateError::Refused { .. } => EngineError::Refused(error.to_string()),
    }
}

impl Engine for RestateEngine {
    fn submit<'a>(&'a self, input: &'a RunInput) -> BoxFuture<'a, Result<(), EngineError>> {
        Box::pin(async move {
            self.client
                .submit(input, &self.key)
                .await
                .map_err(engine_error)
        })
    }

    fn resume<'a>(
        &'a self,
        awakeable: &'a str,
        next: &'a Continuation,
    ) -> BoxFuture<'a, Result<(), EngineError>> {
        Box::pin(async move {
            self.client
                .resolve(awakeable, next, &self.key)
                .await
                .map_err(engine_error)
        })
    }

    fn reachable(&self) -> BoxFuture<'_, bool> {
        Box::pin(self.client.healthy())
    }
}
