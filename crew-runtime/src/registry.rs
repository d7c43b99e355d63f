//! The global registry a crew or a standalone agent dispatches through.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use hooks_core::{HookRegistry, global_registry};

/// The global registry a crew dispatches through: the process-wide one
/// (the default) or one injected (a test's `HookRegistry::new()`).
///
/// Builders take anything that converts into one: `&'static HookRegistry`
/// (the process-wide [`global_registry()`], or a leaked one) or an
/// `Arc<HookRegistry>`. It dereferences to the registry.
///
/// ```
/// use std::sync::Arc;
/// use crew_runtime::{HookRegistry, SharedRegistry, global_registry};
///
/// let process_wide = SharedRegistry::from(global_registry());
/// assert!(std::ptr::eq(&*process_wide, global_registry()));
///
/// // A registry of its own, with the program's attribute hooks in it.
/// let own: SharedRegistry = Arc::new(HookRegistry::with_static_hooks()).into();
/// assert!(!std::ptr::eq(&*own, global_registry()));
/// ```
#[derive(Clone)]
pub struct SharedRegistry(RegistryKind);

#[derive(Clone)]
enum RegistryKind {
    Static(&'static HookRegistry),
    Shared(Arc<HookRegistry>),
}

/// A crew given a registry of its own that is empty, in a program whose
/// attribute hooks (`#[on]`, …) are only in the process-wide registry:
/// those hooks will not run for the crew, which is rarely what was meant
/// (a redaction hook that silently stops). Said once per process.
pub(crate) fn warn_if_attribute_hooks_left_out(given: &SharedRegistry) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !given.is_empty()
        || std::ptr::eq(&**given, global_registry())
        || !HookRegistry::program_has_static_hooks()
        || WARNED.swap(true, Ordering::Relaxed)
    {
        return;
    }
    let warning = "a crew was given an empty registry of its own (HookRegistry::new()): \
                   the program's #[on] and legacy attribute hooks do not run for it; \
                   give it HookRegistry::with_static_hooks() to keep them";
    tracing::warn!("{warning}");
    eprintln!("warning: {warning}");
}

impl Deref for SharedRegistry {
    type Target = HookRegistry;

    fn deref(&self) -> &HookRegistry {
        match &self.0 {
            RegistryKind::Static(registry) => registry,
            RegistryKind::Shared(registry) => registry,
        }
    }
}

impl From<&'static HookRegistry> for SharedRegistry {
    fn from(registry: &'static HookRegistry) -> Self {
        SharedRegistry(RegistryKind::Static(registry))
    }
}

impl From<Arc<HookRegistry>> for SharedRegistry {
    fn from(registry: Arc<HookRegistry>) -> Self {
        SharedRegistry(RegistryKind::Shared(registry))
    }
}

impl fmt::Debug for SharedRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}
