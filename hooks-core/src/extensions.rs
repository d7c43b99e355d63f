//! [`Extensions`]: a typed map that the PRE and POST hooks of one call
//! share, seen by no tool, model or event; [`RegistryExtensions`]: the
//! same kind of map, shared and behind a lock, that lives as long as its
//! [`HookRegistry`](crate::HookRegistry).

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

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

/// Values of any `Send + Sync` type, at most one per type, kept on a
/// [`HookRegistry`](crate::HookRegistry) and gone with it
/// ([`HookRegistry::extensions`](crate::HookRegistry::extensions)): what a
/// library built on the registry records about it (which crews were built
/// on it, which policy sets it carries) without a process-wide table keyed
/// by the registry's address. Each value is handed out as an `Arc`; a
/// value that changes holds its own lock (a `Mutex` inside).
///
/// Dispatch never reads it: it costs a call nothing.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use hooks_core::HookRegistry;
///
/// /// What a library counts per registry.
/// #[derive(Default)]
/// struct Built(Mutex<u32>);
///
/// let registry = Arc::new(HookRegistry::new());
/// for _ in 0..2 {
///     let built = registry.extensions().get_or_insert_with(Built::default);
///     *built.0.lock().unwrap() += 1;
/// }
/// assert_eq!(*registry.extensions().get::<Built>().unwrap().0.lock().unwrap(), 2);
/// // Another registry has a record of its own.
/// assert!(HookRegistry::new().extensions().get::<Built>().is_none());
/// ```
#[derive(Default)]
pub struct RegistryExtensions {
    map: Mutex<Extensions>,
}

impl RegistryExtensions {
    /// An empty map.
    ///
    /// ```
    /// let extensions = hooks_core::RegistryExtensions::new();
    /// assert!(extensions.get::<u32>().is_none());
    /// ```
    pub const fn new() -> Self {
        RegistryExtensions {
            map: Mutex::new(Extensions::new()),
        }
    }

    /// The value of type `T`, if one was stored.
    ///
    /// ```
    /// let extensions = hooks_core::RegistryExtensions::new();
    /// extensions.insert(7u32);
    /// assert_eq!(extensions.get::<u32>().as_deref(), Some(&7));
    /// ```
    pub fn get<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        self.lock().get::<Arc<T>>().cloned()
    }

    /// The value of type `T`, stored first from `make` if there is none.
    /// `make` runs under the map's lock: it must not use this map.
    ///
    /// ```
    /// let extensions = hooks_core::RegistryExtensions::new();
    /// assert_eq!(*extensions.get_or_insert_with(|| 1u32), 1);
    /// assert_eq!(*extensions.get_or_insert_with(|| 2u32), 1, "the first stays");
    /// ```
    pub fn get_or_insert_with<T: Any + Send + Sync>(&self, make: impl FnOnce() -> T) -> Arc<T> {
        let mut map = self.lock();
        if let Some(value) = map.get::<Arc<T>>() {
            return Arc::clone(value);
        }
        let value = Arc::new(make());
        map.insert(Arc::clone(&value));
        value
    }

    /// Stores `value`, returning the value of the same type it replaces
    /// (whoever still holds that one keeps it).
    ///
    /// ```
    /// let extensions = hooks_core::RegistryExtensions::new();
    /// assert!(extensions.insert("first").is_none());
    /// assert_eq!(extensions.insert("second").as_deref(), Some(&"first"));
    /// ```
    pub fn insert<T: Any + Send + Sync>(&self, value: T) -> Option<Arc<T>> {
        self.lock().insert(Arc::new(value))
    }

    fn lock(&self) -> MutexGuard<'_, Extensions> {
        // Every change is one insert into the map: a panic elsewhere
        // cannot leave it half-written, so a poisoned lock is taken over.
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for RegistryExtensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryExtensions")
            .field("len", &self.lock().len())
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

    #[test]
    fn a_registrys_values_go_with_it() {
        struct Record;
        let registry = crate::HookRegistry::new();
        let record = Arc::downgrade(&registry.extensions().get_or_insert_with(|| Record));
        assert!(record.upgrade().is_some(), "kept while the registry lives");
        drop(registry);
        assert!(record.upgrade().is_none(), "dropped with the registry");
    }
}
