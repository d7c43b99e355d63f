//! A fixture for tests that touch the global registry.
//!
//! ```
//! use hooks_core::testing::GlobalHooksFixture;
//! use hooks_core::{get_hooks, register_hook, ToolCallHookContext, PRE_TOOL_CALL};
//!
//! // In a test that registers global hooks:
//! let before = get_hooks(PRE_TOOL_CALL);
//! let fixture = GlobalHooksFixture::new(); // only the link-time hooks now
//! let link_time = get_hooks(PRE_TOOL_CALL).len();
//! register_hook(PRE_TOOL_CALL, |_: &mut ToolCallHookContext| {})?;
//! assert_eq!(get_hooks(PRE_TOOL_CALL).len(), link_time + 1);
//! drop(fixture); // the global registry is as it was
//! assert_eq!(get_hooks(PRE_TOOL_CALL), before);
//! # Ok::<(), hooks_core::RegisterError>(())
//! ```

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::registry::{ChainSet, global_registry};

static SERIAL: Mutex<()> = Mutex::new(());

/// Serializes tests that touch the global registry and puts it back as it
/// was (link-time hooks and global listeners included) when dropped, also
/// when the test panics.
///
/// On creation the global registry is reset to its link-time hooks only, so
/// each test starts from the same state whatever ran before.
///
/// ```
/// use hooks_core::{testing::GlobalHooksFixture, clear_all_hooks, get_hooks, PRE_TOOL_CALL};
/// let fixture = GlobalHooksFixture::new();
/// clear_all_hooks();
/// assert!(get_hooks(PRE_TOOL_CALL).is_empty());
/// drop(fixture); // the link-time hooks are back
/// ```
#[must_use = "the registry is restored when the fixture is dropped"]
pub struct GlobalHooksFixture {
    saved: Arc<ChainSet>,
    saved_listeners: Arc<Vec<(crate::events::ListenerId, ListenerFn)>>,
    serial: Option<MutexGuard<'static, ()>>,
}

type ListenerFn = Arc<dyn Fn(&crate::events::Event) + Send + Sync>;

impl GlobalHooksFixture {
    /// Waits for other fixture holders, saves the global registry and resets
    /// it to the link-time hooks.
    pub fn new() -> Self {
        // A test that panicked while holding the fixture poisons the lock;
        // its drop already restored the registry, so the lock is reusable.
        let serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
        let registry = global_registry();
        let saved = registry.snapshot_full();
        let saved_listeners = registry.events().listeners_snapshot();
        // One swap, so no dispatch sees the registry half-reset.
        drop(registry.restore_snapshot(Arc::new(crate::registry::static_set())));
        registry.events().clear();
        GlobalHooksFixture {
            saved,
            saved_listeners,
            serial: Some(serial),
        }
    }
}

impl Default for GlobalHooksFixture {
    fn default() -> Self {
        GlobalHooksFixture::new()
    }
}

impl Drop for GlobalHooksFixture {
    fn drop(&mut self) {
        let registry = global_registry();
        let replaced = registry.restore_snapshot(Arc::clone(&self.saved));
        let replaced_listeners = registry
            .events()
            .restore_listeners(Arc::clone(&self.saved_listeners));
        // Release the fixture before the test's hooks and listeners are
        // dropped: a `Drop` of theirs may take the fixture or touch the
        // registry without deadlocking.
        drop(self.serial.take());
        drop(replaced);
        drop(replaced_listeners);
    }
}

impl std::fmt::Debug for GlobalHooksFixture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GlobalHooksFixture").finish_non_exhaustive()
    }
}
