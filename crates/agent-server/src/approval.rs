//! Approvals bound by the server (invariant APPROVAL_BOUND_BY_SERVER).
//!
//! When a run pauses for an approval, the client gets an approval id that is an
//! HMAC-SHA256, under a secret only the server holds, over the chat id, the tool call
//! id, the tool id, the hash of the canonical arguments and an expiry. The next
//! request carries the user's decision with that id in the tool part of the submitted
//! history; the server derives the HMAC again from the call as submitted and honours
//! the decision only when it matches, has not expired and was not used before. A
//! forged id, an id replayed in a later request or arguments edited on the client
//! all fail the check, and nothing runs. (The AI SDK's default honours any approval
//! the client sends.)

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ai_core::approval::ApprovalBinding;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// How long an approval id stays valid by default.
pub const DEFAULT_APPROVAL_TTL: Duration = Duration::from_secs(15 * 60);

/// The prefix of every approval id (the format's version).
const VERSION: &str = "apv1";

/// Why an approval was refused. Messages are safe to show the user and the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// Not an approval id this server issues.
    #[error("the approval id is malformed")]
    Malformed,
    /// The HMAC does not match the call as submitted: a forged id, or a call whose
    /// chat, id, tool or arguments changed since the approval was requested.
    #[error(
        "the approval does not match this call (forged, or the call or its arguments were changed)"
    )]
    Mismatch,
    /// Past its expiry.
    #[error("the approval expired; ask again")]
    Expired,
    /// Used before.
    #[error("the approval was already used")]
    Replayed,
    /// The shared record of used approvals could not be written, so the approval
    /// is not honoured (it stays unused).
    #[error("the approval could not be recorded; approve again")]
    Unrecorded,
}

/// Issues and checks approval ids, and remembers which were used (until they
/// expire, so the memory stays bounded by the issue rate times the lifetime).
///
/// An id has exactly one accepted spelling, `apv1.<expiry in decimal, no sign or
/// leading zero>.<64 lower-case hex digits>`; any other encoding of the same values
/// is malformed, and the used-set is keyed on the MAC bytes.
pub struct Approvals {
    key: [u8; 32],
    ttl: Duration,
    /// Tags of redeemed ids, with their expiry.
    used: Mutex<HashMap<[u8; 32], u64>>,
}

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approvals")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Approvals {
    /// With a secret key (keep it secret: whoever has it can approve anything) and a
    /// lifetime for ids.
    pub fn new(key: [u8; 32], ttl: Duration) -> Self {
        Self {
            key,
            ttl,
            used: Mutex::new(HashMap::new()),
        }
    }

    /// With a random key (ids do not survive a restart) and the default lifetime.
    pub fn random() -> Self {
        let mut key = [0u8; 32];
        key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        Self::new(key, DEFAULT_APPROVAL_TTL)
    }

    fn mac(&self, binding: &ApprovalBinding, expiry: u64) -> Hmac<Sha256> {
        // HMAC takes keys of any length (RFC 2104); the key is a fixed 32 bytes, so
        // this cannot fail whatever a caller or client sends.
        #[allow(clippy::expect_used)]
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.key).expect("HMAC accepts a 32-byte key");
        for part in [
            VERSION,
            &binding.scope,
            &binding.tool_call_id,
            &binding.tool_id,
            &binding.args_hash,
            &expiry.to_string(),
        ] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part.as_bytes());
        }
        mac
    }

    /// The approval id for one call of one chat (`binding.scope`: the account's
    /// chat).
    pub fn issue(&self, binding: &ApprovalBinding) -> String {
        let expiry = now_s().saturating_add(self.ttl.as_secs());
        let tag = self.mac(binding, expiry).finalize().into_bytes();
        format!("{VERSION}.{expiry}.{}", hex::encode(tag))
    }

    /// Checks an approval id against the call as submitted and marks it used. A
    /// check that fails does not use the id.
    pub fn redeem(&self, id: &str, binding: &ApprovalBinding) -> Result<(), ApprovalError> {
        let (tag, expiry) = self.verify(id, binding)?;
        self.mark_used(tag, expiry)
    }

    /// Marks a verified approval (its MAC bytes, valid until `expiry`) used in
    /// this process; `Replayed` when it was used before.
    pub fn mark_used(&self, tag: [u8; 32], expiry: u64) -> Result<(), ApprovalError> {
        let now = now_s();
        let mut used = self
            .used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        used.retain(|_, expires| *expires >= now);
        // Keyed on the MAC itself, which no re-encoding of the id changes.
        if used.contains_key(&tag) {
            return Err(ApprovalError::Replayed);
        }
        used.insert(tag, expiry);
        Ok(())
    }

    /// Checks an approval id against the call as submitted (its one spelling, its
    /// MAC, its expiry) without using it: the MAC bytes, which identify the
    /// approval whatever its encoding, and its expiry (Unix seconds). The caller
    /// marks it used where several servers see it ([`Approvals::redeem`] marks it
    /// in this process).
    pub fn verify(
        &self,
        id: &str,
        binding: &ApprovalBinding,
    ) -> Result<([u8; 32], u64), ApprovalError> {
        let mut parts = id.split('.');
        let (Some(VERSION), Some(expiry), Some(tag), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(ApprovalError::Malformed);
        };
        let expiry: u64 = expiry.parse().map_err(|_| ApprovalError::Malformed)?;
        let mut decoded = [0u8; 32];
        hex::decode_to_slice(tag, &mut decoded).map_err(|_| ApprovalError::Malformed)?;
        let tag = decoded;
        // One spelling per approval: `+`, leading zeros or upper-case hex would
        // parse to the same values and pass the MAC, under a different string.
        if id != format!("{VERSION}.{expiry}.{}", hex::encode(tag)) {
            return Err(ApprovalError::Malformed);
        }
        self.mac(binding, expiry)
            .verify_slice(&tag)
            .map_err(|_| ApprovalError::Mismatch)?;
        if now_s() > expiry {
            return Err(ApprovalError::Expired);
        }
        Ok((tag, expiry))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(chat: &str, call: &str, tool: &str, hash: &str) -> ApprovalBinding {
        ApprovalBinding::new(chat, call, tool, hash)
    }

    fn approvals() -> Approvals {
        Approvals::new([7; 32], Duration::from_secs(60))
    }

    #[test]
    fn an_issued_id_is_honoured_once_for_exactly_that_call() {
        let a = approvals();
        let id = a.issue(&b("chat", "call-1", "core__write", "sha256:aa"));
        assert_eq!(
            a.redeem(&id, &b("chat", "call-1", "core__write", "sha256:aa")),
            Ok(())
        );
        assert_eq!(
            a.redeem(&id, &b("chat", "call-1", "core__write", "sha256:aa")),
            Err(ApprovalError::Replayed)
        );
    }

    #[test]
    fn anything_changed_is_a_mismatch_and_does_not_use_the_id() {
        let a = approvals();
        let id = a.issue(&b("chat", "call-1", "core__write", "sha256:aa"));
        for (chat, call, tool, hash) in [
            ("other", "call-1", "core__write", "sha256:aa"),
            ("chat", "call-2", "core__write", "sha256:aa"),
            ("chat", "call-1", "core__exec_shell", "sha256:aa"),
            ("chat", "call-1", "core__write", "sha256:bb"),
        ] {
            assert_eq!(
                a.redeem(&id, &b(chat, call, tool, hash)),
                Err(ApprovalError::Mismatch)
            );
        }
        assert_eq!(
            a.redeem(&id, &b("chat", "call-1", "core__write", "sha256:aa")),
            Ok(())
        );
    }

    #[test]
    fn forged_malformed_and_expired_ids_are_refused() {
        let a = approvals();
        let other = Approvals::new([8; 32], Duration::from_secs(60));
        let forged = other.issue(&b("chat", "c", "t", "h"));
        assert_eq!(
            a.redeem(&forged, &b("chat", "c", "t", "h")),
            Err(ApprovalError::Mismatch)
        );
        for bad in [
            "",
            "apv1",
            "apv1.x.00",
            "apv2.1.00",
            "apv1.1.zz",
            "apv1.1.00.extra",
        ] {
            assert!(a.redeem(bad, &b("chat", "c", "t", "h")).is_err(), "{bad}");
        }
        // A later expiry written into an id breaks its tag.
        let id = a.issue(&b("chat", "c", "t", "h"));
        let mut parts: Vec<&str> = id.split('.').collect();
        let later = (now_s() + 10_000).to_string();
        parts[1] = &later;
        assert_eq!(
            a.redeem(&parts.join("."), &b("chat", "c", "t", "h")),
            Err(ApprovalError::Mismatch)
        );
        let expired = Approvals::new([7; 32], Duration::from_secs(0));
        let id = expired.issue(&b("chat", "c", "t", "h"));
        std::thread::sleep(Duration::from_millis(1100));
        assert_eq!(
            expired.redeem(&id, &b("chat", "c", "t", "h")),
            Err(ApprovalError::Expired)
        );
    }

    #[test]
    fn other_encodings_of_an_issued_id_are_refused_and_cannot_replay_it() {
        let a = approvals();
        let id = a.issue(&b("chat", "c", "t", "h"));
        let parts: Vec<&str> = id.split('.').collect();
        let (expiry, tag) = (parts[1], parts[2]);
        // The same expiry and tag, written differently: each would pass a MAC check
        // on the parsed values, so each must be refused as malformed.
        for variant in [
            format!("apv1.0{expiry}.{tag}"),
            format!("apv1.+{expiry}.{tag}"),
            format!("apv1.000{expiry}.{tag}"),
            format!("apv1.{expiry}.{}", tag.to_uppercase()),
        ] {
            assert_eq!(
                a.redeem(&variant, &b("chat", "c", "t", "h")),
                Err(ApprovalError::Malformed),
                "{variant}"
            );
        }
        assert_eq!(a.redeem(&id, &b("chat", "c", "t", "h")), Ok(()));
        // Used once: no spelling of it runs again.
        for variant in [id.clone(), format!("apv1.0{expiry}.{tag}")] {
            assert!(
                a.redeem(&variant, &b("chat", "c", "t", "h")).is_err(),
                "{variant}"
            );
        }
    }
}
