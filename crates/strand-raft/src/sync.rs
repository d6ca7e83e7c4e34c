//! Small synchronization helpers.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, taking the data of a poisoned mutex as it is (the holders in
/// this crate leave their data consistent at every await and panic point).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}
