//! [`Extensions`]: a typed map that the PRE and POST hooks of one call
//! share, seen by no tool, model or event.

use std::any::{Any, TypeId};
use std::fmt;

use rustc_hash::FxHashMap;

/// Values of any `Send + Sync` type, at most one per type, that the hooks of
/// one call (its PRE and POST chains) share. Tools, the model and events
/// never see them.
///
/// Empty until a hook inserts something: an empty map costs no allocation.
///
/// ```
/// use std::time::Instant;
/// use hooks_core::{Extensions, ToolCallHookContext};
///
/// struct StartedAt(Instant);
///
/// let mut ctx = ToolCallHookContext::new("web_search", Default::default());
/// // In a PRE hook:
/// ctx.extensions.insert(StartedAt(Instant::now()));
/// // In a POST hook of the same call:
/// let started = ctx.extensions.remove::<StartedAt>().map(|s| s.0);
/// assert!(started.is_some());
/// assert!(ctx.extensions.is_empty());
/// ```
#[derive(Default)]
pub struct Extensions {
    map: Option<Box<FxHashMap<TypeId, Box<dyn Any + Send + Sync>>>>,
}

impl Extensions {
    /// An empty map.
    pub const fn new() -> Self {
        Extensions { map: None }
    }

    /// Stores `value`, returning the value of the same type it replaces.
    pub fn insert<T: Any + Send + Sync>(&mut self, value: T) -> Option<T> {
        let previous = self
            .map
            .get_or_insert_with(Default::default)
            .insert(TypeId::of::<T>(), Box::new(value))?;
        previous.downcast::<T>().ok().map(|boxed| *boxed)
    }

    /// The value of type `T`, if one was stored.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.map.as_ref()?.get(&TypeId::of::<T>())?.downcast_ref()
    }

    /// The value of type `T`, mutably.
    pub fn get_mut<T: Any + Send + Sync>(&mut self) -> Option<&mut T> {
        self.map
            .as_mut()?
            .get_mut(&TypeId::of::<T>())?
            .downcast_mut()
    }

    /// Takes the value of type `T` out.
    pub fn remove<T: Any + Send + Sync>(&mut self) -> Option<T> {
        let boxed = self.map.as_mut()?.remove(&TypeId::of::<T>())?;
        boxed.downcast::<T>().ok().map(|boxed| *boxed)
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.map.as_ref().is_none_or(|map| map.is_empty())
    }

    /// How many values are stored.
    pub fn len(&self) -> usize {
        self.map.as_ref().map_or(0, |map| map.len())
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Extensions")
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_value_per_type() {
        let mut extensions = Extensions::new();
        assert_eq!(extensions.insert(1u32), None);
        assert_eq!(extensions.insert(2u32), Some(1));
        assert_eq!(extensions.insert("text"), None);
        assert_eq!(extensions.get::<u32>(), Some(&2));
        if let Some(value) = extensions.get_mut::<u32>() {
            *value = 3;
        }
        assert_eq!(extensions.remove::<u32>(), Some(3));
        assert_eq!(extensions.len(), 1);
        assert_eq!(extensions.get::<u64>(), None);
    }
}
