//! Names shared by the spans and events that carry them.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Serialize, Serializer};

/// A span or event name (or category), shared by every span that carries
/// it: a trace repeats a few hundred names over millions of events, and
/// each span holds a pointer to its name rather than a copy.
///
/// It reads as a `&str` (it derefs to one) and compares with strings.
///
/// # Examples
///
/// ```
/// use steptrace::reader::Name;
///
/// let name = Name::from("forward");
/// assert_eq!(name, "forward");
/// assert!(name.starts_with("for"));
/// assert_eq!(name.as_str(), "forward");
/// assert_eq!(name.to_string(), "forward");
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(Arc<str>);

impl Name {
    /// The name as a string slice.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for Name {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Name {
    fn from(text: &str) -> Self {
        Name(Arc::from(text))
    }
}

impl From<String> for Name {
    fn from(text: String) -> Self {
        Name(Arc::from(text))
    }
}

impl From<Name> for String {
    fn from(name: Name) -> Self {
        name.as_str().to_owned()
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, other: &String) -> bool {
        &*self.0 == other.as_str()
    }
}

impl PartialEq<Name> for str {
    fn eq(&self, other: &Name) -> bool {
        self == &*other.0
    }
}

impl PartialEq<Name> for &str {
    fn eq(&self, other: &Name) -> bool {
        *self == &*other.0
    }
}

impl PartialEq<Name> for String {
    fn eq(&self, other: &Name) -> bool {
        self.as_str() == &*other.0
    }
}

/// The names met so far, each held once, and a number for each (in the
/// order they were first met).
#[derive(Debug, Default)]
pub(crate) struct Names {
    ids: HashMap<Name, u32>,
    names: Vec<Name>,
}

impl Names {
    /// The shared copy of `text`.
    pub(crate) fn get(&mut self, text: &str) -> Name {
        let id = self.id(text);
        self.names[id as usize].clone()
    }

    /// The number of `text` (a trace cannot hold `u32::MAX` distinct
    /// names in memory; past that, one number stands for every newer name).
    pub(crate) fn id(&mut self, text: &str) -> u32 {
        if let Some(&id) = self.ids.get(text) {
            return id;
        }
        let Ok(id) = u32::try_from(self.names.len()) else { return u32::MAX };
        let name = Name::from(text);
        self.names.push(name.clone());
        self.ids.insert(name, id);
        id
    }

    /// The name numbered `id`.
    pub(crate) fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("", Name::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_shared_and_numbered() {
        let mut names = Names::default();
        let a = names.get("a");
        let b = names.get("b");
        let again = names.get("a");
        assert!(Arc::ptr_eq(&a.0, &again.0));
        assert_eq!((names.id("a"), names.id("b"), names.name(1)), (0, 1, "b"));
        assert_eq!(names.name(7), "");
        assert_ne!(a, b);
        assert_eq!(format!("{a:?}"), "\"a\"");
        assert_eq!(serde_json::to_string(&b).unwrap(), "\"b\"");
        let owned = String::from("a");
        assert_eq!("a", a);
        assert_eq!(owned, a);
        assert_eq!(a, owned);
        assert_eq!(a, *"a");
    }
}
