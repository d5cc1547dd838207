//! Heap allocations counted, for the load benchmark's "allocations per turn" (issue #34).
//!
//! [`CountingAlloc`] wraps the system allocator and bumps two relaxed atomic counters (calls
//! and bytes) on every allocation and reallocation. The `herald` binary installs it as the
//! global allocator only when built with the `count-alloc` feature (`src/main.rs`), so a
//! production build pays nothing; the benchmark's echo floor (`examples/echo_floor.rs`)
//! installs the same type, so both processes count alike. `/metrics` shows the totals as
//! `herald_process_allocations` and `herald_process_allocated_bytes` in such a build.
//!
//! Must not: allocate, lock or log inside the allocator (it runs under every `Box::new`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

static CALLS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting. Install with
/// `#[global_allocator] static A: CountingAlloc = CountingAlloc;`.
pub struct CountingAlloc;

fn count(bytes: usize) {
    CALLS.fetch_add(1, Ordering::Relaxed);
    BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds `GlobalAlloc`'s
// contract; the counters are lock-free atomics that never allocate.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller's guarantees for `layout` are passed on as they are.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: as in `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: `ptr` came from this allocator, which is `System`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, which is `System`'s.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Allocation calls (alloc, alloc_zeroed, realloc) and bytes requested since the process
/// started; both zero unless [`CountingAlloc`] is the global allocator.
pub fn totals() -> (u64, u64) {
    (CALLS.load(Ordering::Relaxed), BYTES.load(Ordering::Relaxed))
}

/// Sets the two gauges from [`totals`] for a scrape of `/metrics`; a no-op in a build
/// without the `count-alloc` feature, so that such a build shows no allocation gauges at all.
pub fn publish() {
    if cfg!(feature = "count-alloc") {
        let (calls, bytes) = totals();
        metrics::gauge!("herald_process_allocations").set(calls as f64);
        metrics::gauge!("herald_process_allocated_bytes").set(bytes as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_what_passes_through_it() {
        let a = CountingAlloc;
        let layout = Layout::from_size_align(64, 8).unwrap();
        let (calls, bytes) = totals();
        // SAFETY: a non-zero layout, freed with the same layout by the same allocator.
        unsafe {
            let p = a.alloc(layout);
            assert!(!p.is_null());
            let p = a.realloc(p, layout, 128);
            assert!(!p.is_null());
            a.dealloc(p, Layout::from_size_align(128, 8).unwrap());
        }
        let (calls2, bytes2) = totals();
        assert!(calls2 - calls >= 2 && bytes2 - bytes >= 192);
    }
}
