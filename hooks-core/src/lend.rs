//! Lending a future's thread-local value to the thread for one poll: how a
//! kickoff's event sequence and a crew's redaction follow its futures from
//! thread to thread (`InSequence`, `InRedactionScope`).

use std::cell::Cell;
use std::thread::LocalKey;

/// Runs `poll` with `slot`'s value lent to the thread-local `key`, then
/// takes it back into `slot` and puts the thread's own value back, on
/// unwind too: a panicking future leaves nothing of its own on the thread.
pub(crate) fn lend_for_poll<T: 'static, R>(
    key: &'static LocalKey<Cell<Option<T>>>,
    slot: &mut Option<T>,
    poll: impl FnOnce() -> R,
) -> R {
    let _back = Back {
        key,
        previous: key.replace(slot.take()),
        slot,
    };
    poll()
}

/// Takes the lent value back from the thread, and puts the thread's
/// previous one back, when a poll ends.
struct Back<'a, T: 'static> {
    key: &'static LocalKey<Cell<Option<T>>>,
    previous: Option<T>,
    slot: &'a mut Option<T>,
}

impl<T: 'static> Drop for Back<'_, T> {
    fn drop(&mut self) {
        *self.slot = self.key.replace(self.previous.take());
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    thread_local! {
        static LENT: Cell<Option<u32>> = const { Cell::new(None) };
    }

    #[test]
    fn the_value_is_on_the_thread_only_during_the_poll_and_comes_back() {
        LENT.set(Some(1));
        let mut slot = Some(7);
        let seen = super::lend_for_poll(&LENT, &mut slot, || LENT.get());
        assert_eq!(seen, Some(7));
        assert_eq!(slot, Some(7), "taken back");
        assert_eq!(LENT.get(), Some(1), "the thread's own value is back");
    }

    #[test]
    fn a_panicking_poll_still_gives_the_value_back() {
        LENT.set(None);
        let mut slot = Some(7);
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            super::lend_for_poll(&LENT, &mut slot, || panic!("the future panicked"))
        }));
        assert!(unwound.is_err());
        assert_eq!(slot, Some(7));
        assert_eq!(LENT.get(), None);
    }
}
