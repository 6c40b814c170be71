//! What the model saw of the calls the server ran, by chat and call id, so a
//! history rebuilt from a client's messages (which hold only the redacted view)
//! gives the model the same arguments and results as before. Bounded: the oldest
//! entries go first; entries expire.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::contract::Transcript;

/// Entries kept by default.
pub const DEFAULT_CAPACITY: usize = 10_000;
/// How long an entry is kept by default.
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);

type Key = (String, String);
/// Arguments text, result text, and when they were stored.
type Entry = (String, String, Instant);

/// A bounded, expiring map of (chat id, call id) to (arguments, result) text.
#[derive(Debug)]
pub struct TranscriptStore {
    capacity: usize,
    ttl: Duration,
    inner: Mutex<(HashMap<Key, Entry>, VecDeque<Key>)>,
}

impl TranscriptStore {
    /// A store of at most `capacity` entries, each kept for `ttl`.
    pub fn new(capacity: usize, ttl: Duration) -> Self {
        Self {
            capacity: capacity.max(1),
            ttl,
            inner: Mutex::new((HashMap::new(), VecDeque::new())),
        }
    }

    /// Records one call.
    pub fn store(&self, chat_id: &str, call_id: &str, arguments: String, result: String) {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (map, order) = &mut *inner;
        let key = (chat_id.to_owned(), call_id.to_owned());
        if map
            .insert(key.clone(), (arguments, result, Instant::now()))
            .is_none()
        {
            order.push_back(key);
        }
        while map.len() > self.capacity {
            match order.pop_front() {
                Some(old) => {
                    map.remove(&old);
                }
                None => break,
            }
        }
    }
}

impl Default for TranscriptStore {
    fn default() -> Self {
        Self::new(DEFAULT_CAPACITY, DEFAULT_TTL)
    }
}

impl Transcript for TranscriptStore {
    fn recall(&self, chat_id: &str, tool_call_id: &str) -> Option<(String, String)> {
        let inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (args, result, at) = inner
            .0
            .get(&(chat_id.to_owned(), tool_call_id.to_owned()))?;
        (at.elapsed() <= self.ttl).then(|| (args.clone(), result.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recalls_by_chat_and_call_and_forgets_the_oldest() {
        let store = TranscriptStore::new(2, DEFAULT_TTL);
        store.store("c", "1", "{}".into(), "one".into());
        store.store("c", "2", "{}".into(), "two".into());
        assert_eq!(store.recall("c", "1"), Some(("{}".into(), "one".into())));
        assert_eq!(store.recall("other", "1"), None);
        store.store("c", "3", "{}".into(), "three".into());
        assert_eq!(store.recall("c", "1"), None);
        assert!(store.recall("c", "3").is_some());
        let expiring = TranscriptStore::new(2, Duration::ZERO);
        expiring.store("c", "1", "{}".into(), "x".into());
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(expiring.recall("c", "1"), None);
    }
}
