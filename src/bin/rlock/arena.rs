//! The binary's global allocator: a bump arena for the process's first
//! allocations, the system allocator (glibc's malloc) for the rest.
//!
//! A run of rlock that clap parses makes about 1,000 allocations before
//! it connects (most of them clap's; exec's usual line, which
//! `cli/fast.rs` reads, far fewer). From the arena an allocation is one
//! atomic compare-and-swap and a free is nothing, where glibc's malloc
//! keeps bins and chunk headers; and the guard rlock forks takes its 64
//! KiB receive buffer from the arena's untouched zero pages, where glibc's
//! calloc cleared heap it had used (15 page faults). Measured in
//! BENCHMARKS.md ("faults and allocations").
//!
//! The arena is never reused: a freed block's bytes stay taken, and once
//! the arena is full (or an allocation does not fit) every allocation goes
//! to the system allocator. So its memory is bounded by [`SIZE`] however
//! long the process runs (an exec renewing for hours fills it after about
//! a hundred renewals, then allocates from malloc), and every byte past
//! the bump offset is still the zero the process started with
//! (`alloc_zeroed` needs no memset).
//!
//! Threads: the bump offset is one atomic; a block, once handed out, is its
//! owner's alone. Fork: the child has its own copy of the arena and of the
//! offset, and each process bumps its own (a block a thread of the parent
//! was taking during the fork is only lost to the child).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The arena's bytes (.bss: a page costs nothing until it is written):
/// room for what a run of `exec` allocates, about 200 KiB in rlock when
/// clap parses its line, and the guard's 64 KiB after the fork.
pub(crate) const SIZE: usize = 512 * 1024;

/// Larger allocations, or more strictly aligned ones, go to the system
/// allocator even while the arena has room.
const LARGEST: usize = 64 * 1024;
const MAX_ALIGN: usize = 4096;

/// Bump allocation in `len` bytes at `base`, with the system allocator
/// behind it.
pub(crate) struct Arena {
    base: *mut u8,
    len: usize,
    /// Bytes handed out from `base` on (alignment padding included); only
    /// ever grows.
    used: AtomicUsize,
}

// SAFETY: the arena's only mutable state is the atomic `used`; its memory
// is handed out in disjoint blocks, each used by its owner only.
unsafe impl Sync for Arena {}

impl Arena {
    /// An arena over `len` bytes at `base`.
    ///
    /// # Safety
    /// `base..base + len` must be valid for reads and writes, all zero,
    /// used by nothing else, and live as long as the arena and every block
    /// it hands out.
    pub(crate) const unsafe fn new(base: *mut u8, len: usize) -> Self {
        Self {
            base,
            len,
            used: AtomicUsize::new(0),
        }
    }

    fn owns(&self, ptr: *mut u8) -> bool {
        let (p, b) = (ptr as usize, self.base as usize);
        p >= b && p < b + self.len
    }

    /// A block for `layout` from the arena, or None if it does not fit (or
    /// is larger than [`LARGEST`]). Its bytes are zero.
    fn bump(&self, layout: Layout) -> Option<*mut u8> {
        if layout.size() > LARGEST || layout.align() > MAX_ALIGN {
            return None;
        }
        let base = self.base as usize;
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            // The block's start, aligned as an address (the base is only
            // as aligned as its caller made it). No overflow: base + len
            // is an address, used <= len, align and size are at most 64
            // KiB, far below the address space's end.
            let start = (base + used).next_multiple_of(layout.align()) - base;
            let end = start + layout.size();
            if end > self.len {
                return None;
            }
            match self
                .used
                .compare_exchange_weak(used, end, Ordering::Relaxed, Ordering::Relaxed)
            {
                // SAFETY: start + size <= len: inside the arena, and
                // `used..end` was nobody's until this exchange took it.
                Ok(_) => return Some(unsafe { self.base.add(start) }),
                Err(now) => used = now,
            }
        }
    }

    /// Grow the arena block at `ptr` (`old` bytes) in place to `new`
    /// bytes, if it is the last block handed out and the arena has room.
    fn grow_last(&self, ptr: *mut u8, old: usize, new: usize) -> bool {
        let end = ptr as usize - self.base as usize + old;
        new <= LARGEST
            && end - old + new <= self.len
            && self
                .used
                .compare_exchange(end, end - old + new, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Bytes of the arena handed out so far.
    #[cfg(test)]
    fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }
}

// SAFETY: blocks from the arena are disjoint (`bump`'s exchange), aligned
// and sized as asked, and never handed out twice; the arena's memory lives
// as long as its blocks (`Arena::new`'s contract). Everything else is the
// system allocator's, given back to it only.
unsafe impl GlobalAlloc for Arena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match self.bump(layout) {
            Some(p) => p,
            // SAFETY: the caller's layout, passed on unchanged.
            None => unsafe { System.alloc(layout) },
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match self.bump(layout) {
            // Never handed out before: still zero (see the module doc).
            Some(p) => p,
            // SAFETY: the caller's layout, passed on unchanged.
            None => unsafe { System.alloc_zeroed(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !self.owns(ptr) {
            // SAFETY: not the arena's, so the system allocator's, with the
            // layout the caller allocated it with.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !self.owns(ptr) {
            // SAFETY: the system allocator's block, passed on unchanged.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        if new_size <= layout.size() || self.grow_last(ptr, layout.size(), new_size) {
            return ptr;
        }
        // SAFETY: GlobalAlloc::realloc's caller guarantees that new_size,
        // rounded up to the alignment, does not overflow isize.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: a non-zero size (new_size > layout.size()).
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are at least layout.size() long, and
            // distinct (the new one was free until now).
            unsafe { std::ptr::copy_nonoverlapping(ptr, new, layout.size()) };
        }
        new
    }
}

/// The arena's memory: zero (.bss), untouched until used.
#[repr(C, align(4096))]
struct Space(UnsafeCell<[u8; SIZE]>);

// SAFETY: only the arena touches it, through the blocks it hands out.
unsafe impl Sync for Space {}

static SPACE: Space = Space(UnsafeCell::new([0; SIZE]));

/// The binary's allocator.
#[global_allocator]
// SAFETY: SPACE is static, zero at start, SIZE bytes, and nothing but this
// arena uses it.
pub(crate) static ARENA: Arena = unsafe { Arena::new(SPACE.0.get().cast(), SIZE) };

#[cfg(test)]
mod tests;
