//! The page the holder and its guard share (`MAP_SHARED`, mapped before
//! the fork): the kill deadline, and a flag set when the holder ends
//! cleanly. See the module doc of [`super`] for why a page.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::clock::BootTime;

/// One page shared by the holder and its guard.
#[derive(Clone, Copy)]
pub(crate) struct Page {
    /// [0]: the kill deadline, CLOCK_BOOTTIME ns (0: none); [1]: nonzero
    /// once the holder ends cleanly.
    words: &'static [AtomicU64; 2],
}

impl Page {
    /// A new page, before the fork; None if it cannot be mapped.
    pub(crate) fn new() -> Option<Page> {
        // SAFETY: a fresh anonymous shared mapping, never unmapped (it
        // lives as long as the process), zeroed and aligned for atomics.
        let words = unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if p == libc::MAP_FAILED {
                return None;
            }
            &*p.cast::<[AtomicU64; 2]>()
        };
        Some(Page { words })
    }

    /// Set the kill deadline (None: none); the guard reads it when it
    /// next wakes.
    pub(crate) fn set_deadline(&self, at: Option<BootTime>) {
        // 0 means none, so a deadline at boot itself is 1 ns after.
        let ns = at.map_or(0, |d| crate::duration::nanos(d.since_boot()).max(1));
        self.words[0].store(ns, Ordering::SeqCst);
    }

    pub(crate) fn deadline(&self) -> Option<BootTime> {
        let ns = self.words[0].load(Ordering::SeqCst);
        (ns != 0).then(|| BootTime::from_since_boot(Duration::from_nanos(ns)))
    }

    /// The holder ends cleanly: set before it closes its end.
    pub(crate) fn finish(&self) {
        self.words[1].store(1, Ordering::SeqCst);
    }

    pub(crate) fn finished(&self) -> bool {
        self.words[1].load(Ordering::SeqCst) != 0
    }
}
