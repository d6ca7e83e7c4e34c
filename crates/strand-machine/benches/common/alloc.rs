//! A counting global allocator over `System`, for the benches' heap and
//! allocation figures (and for `tests/alloc_per_append.rs`, which includes
//! this file by path).
//!
//! * Allocation events (`alloc`, `alloc_zeroed` and `realloc`: a `Vec`
//!   growth is a heap allocation as far as the hot path is concerned) are
//!   counted only on a thread that opened a [`count_allocations`] region,
//!   so that other threads (the test harness, divan's timer) add no noise.
//! * Live and peak bytes are process-wide (every thread), for the
//!   "heap bytes per X" figures taken on one thread with nothing else
//!   running.
//!
//! Install it with
//! `#[global_allocator] static GLOBAL: Counting = Counting;`.

// A `GlobalAlloc` impl is necessarily `unsafe`: the workspace denies
// `unsafe_code` and this measurement-only module is the one place that
// allows it. Every call forwards to `System` with the caller's arguments.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The counting allocator: `System` plus atomics.
pub(crate) struct Counting;

/// Bytes currently allocated (all threads).
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// Highest value `LIVE` reached since the last [`reset_peak`].
static PEAK: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Whether this thread is inside a [`count_allocations`] region.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    /// Allocation events this thread made inside counting regions.
    static EVENTS: Cell<u64> = const { Cell::new(0) };
}

fn grow(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

fn shrink(by: usize) {
    LIVE.fetch_sub(by, Ordering::Relaxed);
}

fn event() {
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = EVENTS.try_with(|e| e.set(e.get() + 1));
    }
}

// SAFETY: every method forwards to `System` unchanged; the bookkeeping
// only touches atomics and const-initialised thread-local `Cell`s (no
// allocation, no destructor), so it cannot re-enter the allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            grow(layout.size());
            event();
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            grow(layout.size());
            event();
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) };
        shrink(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let new_ptr = unsafe { System.realloc(ptr, layout, new_size) };
        if !new_ptr.is_null() {
            if new_size >= layout.size() {
                grow(new_size - layout.size());
            } else {
                shrink(layout.size() - new_size);
            }
            event();
        }
        new_ptr
    }
}

/// Runs `f` and returns its result with the number of allocation events
/// (`alloc`, `alloc_zeroed`, `realloc`) this thread made inside it.
/// Dropping the result is up to the caller, outside the region.
pub(crate) fn count_allocations<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = EVENTS.with(Cell::get);
    COUNTING.with(|c| c.set(true));
    let out = f();
    COUNTING.with(|c| c.set(false));
    (out, EVENTS.with(Cell::get) - before)
}

/// Bytes currently allocated, all threads.
pub(crate) fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Highest live byte count since the last [`reset_peak`].
pub(crate) fn peak_bytes() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// Starts a new peak window at the current live byte count.
pub(crate) fn reset_peak() {
    PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
}
