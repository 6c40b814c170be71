//! [`Id`]: a run's correlation ids as its context and every one of its events
//! carry them.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An id that a run's context and each of its events share (the run id, the
/// trace id, the ingress request id): immutable text behind a reference count.
///
/// A run emits an event for every streamed delta, and each event names its run
/// and trace: as `String`s those were two allocations and two copies per delta,
/// and telling whether two events came from the same run compared their bytes.
/// A clone of an `Id` is a count; two clones compare equal at a pointer check.
///
/// It reads as a `&str` (`Deref`, `AsRef<str>`, `Borrow<str>`), compares with
/// `str` and `String`, and is made from either (`"r1".into()`). On the wire it
/// is a JSON string.
///
/// ```
/// use ai_core::Id;
///
/// let run: Id = "run-1".into();
/// let copy = run.clone();
/// assert_eq!(run, copy);
/// assert_eq!(run, "run-1");
/// assert!(run.starts_with("run-"));
/// assert_eq!(serde_json::to_string(&run).unwrap(), "\"run-1\"");
/// ```
#[derive(Clone, Eq, PartialOrd, Ord)]
pub struct Id(Arc<str>);

impl Id {
    /// The id's text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Id {
    /// The empty id.
    fn default() -> Self {
        Self(Arc::from(""))
    }
}

impl PartialEq for Id {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

impl Hash for Id {
    /// As its text hashes (an `Id` borrows as `str` in maps and sets).
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl Deref for Id {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Id {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Id {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<&str> for Id {
    fn from(text: &str) -> Self {
        Self(Arc::from(text))
    }
}

impl From<String> for Id {
    fn from(text: String) -> Self {
        Self(Arc::from(text))
    }
}

impl From<&String> for Id {
    fn from(text: &String) -> Self {
        Self(Arc::from(text.as_str()))
    }
}

impl From<&Id> for Id {
    fn from(id: &Id) -> Self {
        id.clone()
    }
}

impl From<Id> for String {
    fn from(id: Id) -> Self {
        id.0.as_ref().to_owned()
    }
}

impl From<&Id> for String {
    fn from(id: &Id) -> Self {
        id.as_str().to_owned()
    }
}

impl PartialEq<str> for Id {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Id {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for Id {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<Id> for str {
    fn eq(&self, other: &Id) -> bool {
        self == &*other.0
    }
}

impl PartialEq<Id> for &str {
    fn eq(&self, other: &Id) -> bool {
        *self == &*other.0
    }
}

impl PartialEq<Id> for String {
    fn eq(&self, other: &Id) -> bool {
        **self == *other.0
    }
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_their_text_and_equal_texts_compare_equal() {
        let a = Id::from("r1");
        let b = a.clone();
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert_eq!(a, b);
        assert_eq!(
            a,
            Id::from(String::from("r1")),
            "another allocation, same text"
        );
        assert_ne!(a, Id::from("r2"));
        assert_eq!(String::from(a.clone()), "r1");
        assert_eq!("r1", a);
        assert_eq!(format!("{a} {a:?}"), "r1 \"r1\"");
    }

    #[test]
    fn it_is_a_json_string_both_ways() {
        let id: Id = serde_json::from_str("\"trace-7\"").unwrap();
        assert_eq!(id, "trace-7");
        assert_eq!(serde_json::to_value(&id).unwrap(), "trace-7");
        assert!(serde_json::from_str::<Id>("7").is_err());
    }
}
