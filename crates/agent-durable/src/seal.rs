//! What crosses a durable engine is sealed: encrypted and authenticated under a
//! key only the servers and workers hold, so a process that reaches the
//! engine's ingress or admin API (another local account, say) neither reads a
//! run's prompts, tool arguments, results and answers nor starts, replays or
//! approves anything.
//!
//! [`Sealed`] is ChaCha20-Poly1305 (ring) with a random 96-bit nonce; its
//! associated data names its [`Purpose`], so a sealed step is never taken for
//! a sealed run. What a payload is bound to (a run id, an account, an
//! expiry, the calls an approval decides) is inside it, authenticated with
//! it, and checked by the handler that opens it (see [`crate::restate`]).
//!
//! [`DurableKey`] holds the keys: the first seals, every one opens, so a key is
//! rotated by putting a new one first, restarting the servers and workers, and
//! removing the old one once no sealed payload under it is waiting (the
//! operator's steps are in README). The composition root reads them from a
//! file only the serving user can read; this crate reads no file.

use base64::Engine;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

/// Why a payload could not be sealed or opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    /// No key opens it: it was not sealed by a process holding this store's
    /// key, or it was changed since.
    #[error("the seal does not hold: it was not made by a server or worker holding this key")]
    Forged,
    /// It is not a sealed payload of this version.
    #[error("not a sealed payload: {0}")]
    Malformed(String),
    /// The key is unusable.
    #[error("unusable key: {0}")]
    Key(String),
    /// The payload does not serialize.
    #[error("the payload does not serialize: {0}")]
    Payload(String),
}

/// What a sealed payload is for: its associated data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Purpose {
    /// A run submitted to the engine.
    Run,
    /// The decisions that continue a paused run.
    Continuation,
    /// A step of a run, as the engine journals it.
    Step,
}

impl Purpose {
    fn aad(self) -> &'static [u8] {
        match self {
            Self::Run => b"agent durable run v1",
            Self::Continuation => b"agent durable continuation v1",
            Self::Step => b"agent durable step v1",
        }
    }
}

/// The keys that seal and open payloads (see the module docs).
#[derive(Clone)]
pub struct DurableKey {
    keys: Vec<[u8; 32]>,
}

impl std::fmt::Debug for DurableKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DurableKey({} key(s), redacted)", self.keys.len())
    }
}

impl DurableKey {
    /// The keys, the sealing one first.
    pub fn new(keys: Vec<[u8; 32]>) -> Result<Self, SealError> {
        if keys.is_empty() {
            return Err(SealError::Key("no key".into()));
        }
        Ok(Self { keys })
    }

    /// Keys from a key file's text: one key a line, 64 hex digits, the sealing
    /// one first; blank lines and lines starting with `#` are ignored.
    pub fn parse(text: &str) -> Result<Self, SealError> {
        let mut keys = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut key = [0u8; 32];
            hex::decode_to_slice(line, &mut key)
                .map_err(|_| SealError::Key(format!("line {} is not 64 hex digits", n + 1)))?;
            keys.push(key);
        }
        Self::new(keys)
    }

    /// A fresh random key, as a key file's line.
    pub fn generate_line() -> Result<String, SealError> {
        let mut key = [0u8; 32];
        SystemRandom::new()
            .fill(&mut key)
            .map_err(|_| SealError::Key("no randomness".into()))?;
        Ok(hex::encode(key))
    }

    /// A 32-byte key for `purpose`, derived from the sealing key (HKDF-SHA256):
    /// for other secrets the servers share, such as the approval key.
    pub fn derive(&self, purpose: &str) -> [u8; 32] {
        struct Len;
        impl ring::hkdf::KeyType for Len {
            fn len(&self) -> usize {
                32
            }
        }
        let salt = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, b"agent derived key v1");
        let prk = salt.extract(&self.keys[0]);
        let info = [purpose.as_bytes()];
        let mut out = [0u8; 32];
        // The output length is fixed at 32, within HKDF's limit: neither step
        // can fail.
        if let Ok(okm) = prk.expand(&info, Len) {
            let _ = okm.fill(&mut out);
        }
        out
    }

    fn cipher(key: &[u8; 32]) -> Result<LessSafeKey, SealError> {
        UnboundKey::new(&CHACHA20_POLY1305, key)
            .map(LessSafeKey::new)
            .map_err(|_| SealError::Key("not a ChaCha20-Poly1305 key".into()))
    }
}

/// A sealed payload (see the module docs): base64 of the nonce and of the
/// ciphertext with its tag.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Sealed {
    /// The format's version (1).
    pub v: u8,
    /// The nonce, base64.
    pub nonce: String,
    /// The ciphertext and its tag, base64.
    pub data: String,
}

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

impl Sealed {
    /// Seals `value`'s JSON for `purpose` under the sealing key.
    pub fn seal<T: serde::Serialize>(
        value: &T,
        purpose: Purpose,
        key: &DurableKey,
    ) -> Result<Self, SealError> {
        let mut data = serde_json::to_vec(value).map_err(|e| SealError::Payload(e.to_string()))?;
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| SealError::Key("no randomness".into()))?;
        DurableKey::cipher(&key.keys[0])?
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(purpose.aad()),
                &mut data,
            )
            .map_err(|_| SealError::Key("sealing failed".into()))?;
        Ok(Self {
            v: 1,
            nonce: B64.encode(nonce),
            data: B64.encode(data),
        })
    }

    /// The payload, when one of the keys opens it for `purpose`.
    pub fn open<T: serde::de::DeserializeOwned>(
        &self,
        purpose: Purpose,
        key: &DurableKey,
    ) -> Result<T, SealError> {
        if self.v != 1 {
            return Err(SealError::Malformed(format!("version {}", self.v)));
        }
        let nonce: [u8; NONCE_LEN] = B64
            .decode(&self.nonce)
            .ok()
            .and_then(|n| n.try_into().ok())
            .ok_or_else(|| SealError::Malformed("the nonce".into()))?;
        let data = B64
            .decode(&self.data)
            .map_err(|_| SealError::Malformed("the data is not base64".into()))?;
        for candidate in &key.keys {
            let mut buffer = data.clone();
            let cipher = DurableKey::cipher(candidate)?;
            if let Ok(plain) = cipher.open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(purpose.aad()),
                &mut buffer,
            ) {
                return serde_json::from_slice(plain)
                    .map_err(|e| SealError::Malformed(format!("the payload: {e}")));
            }
        }
        Err(SealError::Forged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(line: &str) -> DurableKey {
        DurableKey::parse(line).unwrap()
    }

    #[test]
    fn a_sealed_payload_opens_only_under_its_key_and_purpose() {
        let k = key(&DurableKey::generate_line().unwrap());
        let sealed = Sealed::seal(
            &serde_json::json!({"prompt": "secret plan"}),
            Purpose::Run,
            &k,
        )
        .unwrap();
        assert!(!sealed.data.contains("secret"), "the payload is encrypted");
        let opened: serde_json::Value = sealed.open(Purpose::Run, &k).unwrap();
        assert_eq!(opened["prompt"], "secret plan");
        assert_eq!(
            sealed.open::<serde_json::Value>(Purpose::Step, &k),
            Err(SealError::Forged),
            "a run is never taken for a step"
        );
        let other = key(&DurableKey::generate_line().unwrap());
        assert_eq!(
            sealed.open::<serde_json::Value>(Purpose::Run, &other),
            Err(SealError::Forged)
        );
        let mut edited = sealed.clone();
        edited.data.replace_range(0..4, "AAAA");
        assert_eq!(
            edited.open::<serde_json::Value>(Purpose::Run, &k),
            Err(SealError::Forged)
        );
    }

    #[test]
    fn a_rotated_key_file_seals_with_its_first_key_and_opens_with_any() {
        let (old, new) = (
            DurableKey::generate_line().unwrap(),
            DurableKey::generate_line().unwrap(),
        );
        let before = Sealed::seal(&1, Purpose::Step, &key(&old)).unwrap();
        let rotated = key(&format!("# rotated\n{new}\n\n{old}\n"));
        assert_eq!(before.open::<i32>(Purpose::Step, &rotated), Ok(1));
        let after = Sealed::seal(&2, Purpose::Step, &rotated).unwrap();
        assert_eq!(after.open::<i32>(Purpose::Step, &key(&new)), Ok(2));
        assert_eq!(
            after.open::<i32>(Purpose::Step, &key(&old)),
            Err(SealError::Forged)
        );
    }

    #[test]
    fn key_files_are_checked_and_derived_keys_differ_by_purpose() {
        assert!(DurableKey::parse("").is_err());
        assert!(DurableKey::parse("abc").is_err());
        let k = key(&"11".repeat(32));
        assert_ne!(k.derive("approvals"), k.derive("other"));
        assert_eq!(
            k.derive("approvals"),
            key(&"11".repeat(32)).derive("approvals")
        );
        assert!(!format!("{k:?}").contains("11"));
    }
}
