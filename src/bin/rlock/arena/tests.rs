use super::*;

/// An arena over `len` bytes of a zeroed buffer of its own (leaked: blocks
/// from it may outlive the test's locals).
fn arena(len: usize) -> &'static Arena {
    let buf: &'static mut [u64] = Vec::leak(vec![0u64; len / 8]);
    // SAFETY: the leaked buffer is zero, lives forever, and only this
    // arena uses it.
    Box::leak(Box::new(unsafe {
        Arena::new(buf.as_mut_ptr().cast(), len)
    }))
}

fn layout(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).unwrap()
}

#[test]
fn allocations_are_aligned_disjoint_zero_and_bumped() {
    let a = arena(4096);
    let mut blocks = Vec::new();
    for (size, align) in [(3, 1), (8, 8), (1, 1), (24, 16), (5, 64), (100, 4)] {
        // SAFETY: a non-zero size.
        let p = unsafe { a.alloc_zeroed(layout(size, align)) };
        assert!(a.owns(p), "from the arena");
        assert_eq!(p as usize % align, 0, "aligned to {align}");
        // SAFETY: the block is `size` bytes.
        let bytes = unsafe { std::slice::from_raw_parts_mut(p, size) };
        assert!(bytes.iter().all(|&b| b == 0), "zero");
        bytes.fill(0xAA);
        blocks.push((p as usize, size));
    }
    blocks.sort_unstable();
    for w in blocks.windows(2) {
        assert!(w[0].0 + w[0].1 <= w[1].0, "disjoint: {w:?}");
    }
    let (last, size) = *blocks.last().unwrap();
    assert_eq!(a.used(), last + size - a.base as usize);
}

#[test]
fn a_free_is_nothing_and_the_space_is_not_reused() {
    let a = arena(4096);
    let l = layout(64, 8);
    // SAFETY: a non-zero size; each block freed once, with its layout.
    unsafe {
        let p = a.alloc(l);
        p.write_bytes(0xAA, 64);
        a.dealloc(p, l);
        let q = a.alloc_zeroed(l);
        assert_ne!(p, q, "a freed block is not handed out again");
        assert_eq!(*q, 0, "new blocks are zero");
        assert_eq!(a.used(), 128);
        a.dealloc(q, l);
    }
}

#[test]
fn past_the_arena_and_above_the_largest_go_to_the_system_allocator() {
    let a = arena(1024);
    // SAFETY: non-zero sizes; the system's blocks freed with their layouts.
    unsafe {
        let big = a.alloc(layout(LARGEST + 1, 8));
        assert!(!big.is_null() && !a.owns(big), "too large for the arena");
        a.dealloc(big, layout(LARGEST + 1, 8));
        let aligned = a.alloc(layout(8, 2 * MAX_ALIGN));
        assert!(
            !aligned.is_null() && !a.owns(aligned),
            "too aligned for the arena"
        );
        assert_eq!(aligned as usize % (2 * MAX_ALIGN), 0);
        a.dealloc(aligned, layout(8, 2 * MAX_ALIGN));
        assert_eq!(a.used(), 0);
        let first = a.alloc(layout(1000, 8));
        assert!(a.owns(first));
        let over = a.alloc_zeroed(layout(100, 8));
        assert!(!over.is_null() && !a.owns(over), "full: the system's");
        assert!(
            std::slice::from_raw_parts(over, 100)
                .iter()
                .all(|&b| b == 0)
        );
        a.dealloc(over, layout(100, 8));
        let small = a.alloc(layout(24, 8));
        assert!(a.owns(small), "what still fits is the arena's");
        assert_eq!(a.used(), 1024);
        let after = a.alloc(layout(1, 1));
        assert!(!a.owns(after), "full");
        a.dealloc(after, layout(1, 1));
    }
}

#[test]
fn realloc_grows_the_last_block_in_place_and_copies_the_others() {
    let a = arena(4096);
    // SAFETY: non-zero sizes; each block used within its size.
    unsafe {
        let p = a.alloc(layout(16, 8));
        p.write_bytes(1, 16);
        let grown = a.realloc(p, layout(16, 8), 48);
        assert_eq!(grown, p, "the last block grows in place");
        assert_eq!(a.used(), 48);
        grown.add(16).write_bytes(2, 32);
        let other = a.alloc(layout(8, 8));
        other.write_bytes(3, 8);
        let moved = a.realloc(grown, layout(48, 8), 100);
        assert_ne!(moved, grown, "not the last block: a copy");
        assert!(a.owns(moved));
        let bytes = std::slice::from_raw_parts(moved, 100);
        assert!(bytes[..16].iter().all(|&b| b == 1));
        assert!(bytes[16..48].iter().all(|&b| b == 2));
        assert!(bytes[48..].iter().all(|&b| b == 0));
        assert_eq!(*other, 3, "the block after it untouched");
        let shrunk = a.realloc(moved, layout(100, 8), 10);
        assert_eq!(shrunk, moved, "a shrink stays");
        // Out of the arena: copied into the system's block, which then
        // reallocates as the system does.
        let out = a.realloc(shrunk, layout(10, 8), LARGEST + 1);
        assert!(!a.owns(out));
        assert!(std::slice::from_raw_parts(out, 10).iter().all(|&b| b == 1));
        let out2 = a.realloc(out, layout(LARGEST + 1, 8), 2 * LARGEST);
        assert!(!a.owns(out2));
        assert!(std::slice::from_raw_parts(out2, 10).iter().all(|&b| b == 1));
        a.dealloc(out2, layout(2 * LARGEST, 8));
    }
}

#[test]
fn threads_bump_disjoint_blocks_until_full_then_use_the_system() {
    let a = arena(64 * 1024);
    let per_thread: Vec<Vec<(usize, usize, bool)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4u8)
            .map(|t| {
                s.spawn(move || {
                    let mut mine = Vec::new();
                    for i in 0..2000usize {
                        let size = 1 + (i * 7 + usize::from(t)) % 40;
                        let l = layout(size, 8);
                        // SAFETY: a non-zero size; each block written
                        // within its size; the system's freed with their
                        // layout at the end.
                        unsafe {
                            let mut p = a.alloc(l);
                            p.write_bytes(t, size);
                            let mut len = size;
                            if i % 5 == 0 {
                                p = a.realloc(p, l, size + 16);
                                p.add(size).write_bytes(t, 16);
                                len += 16;
                            }
                            mine.push((p as usize, len, a.owns(p)));
                        }
                    }
                    // Every byte of every block is still this thread's.
                    for &(p, len, _) in &mine {
                        // SAFETY: a live block of `len` bytes.
                        let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
                        assert!(
                            bytes.iter().all(|&b| b == t),
                            "thread {t}'s block overwritten"
                        );
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut arena_blocks: Vec<(usize, usize)> = Vec::new();
    let mut system = 0;
    for (p, len, owned) in per_thread.into_iter().flatten() {
        if owned {
            arena_blocks.push((p, len));
        } else {
            system += 1;
            // SAFETY: the system's block, with the size and alignment it
            // last had.
            unsafe { a.dealloc(p as *mut u8, layout(len, 8)) };
        }
    }
    assert!(
        system > 0,
        "8,000 blocks of ~20-36 bytes do not fit in 64 KiB"
    );
    arena_blocks.sort_unstable();
    for w in arena_blocks.windows(2) {
        assert!(w[0].0 + w[0].1 <= w[1].0, "disjoint: {w:?}");
    }
    assert!(a.used() <= 64 * 1024);
}

#[test]
fn a_forked_child_bumps_its_own_copy() {
    let a = arena(4096);
    // SAFETY: a non-zero size.
    let before = unsafe { a.alloc(layout(96, 8)) };
    // SAFETY: the child makes only the arena's atomic bumps, writes to its
    // own copy of the buffer and _exits; the parent waits for it.
    unsafe {
        match libc::fork() {
            0 => {
                let p = a.alloc(layout(200, 8));
                p.write_bytes(7, 200);
                let ok = a.owns(p) && p == before.add(96) && a.used() == 296;
                libc::_exit(if ok { 0 } else { 1 });
            }
            pid => {
                assert!(pid > 0);
                let mut status = 0;
                assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
                assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
            }
        }
        assert_eq!(a.used(), 96, "the child's bumps are its own");
        let p = a.alloc(layout(200, 8));
        assert_eq!(p, before.add(96), "the parent bumps on from where it was");
        assert_eq!(*p, 0, "the child's writes were to its copy");
    }
}

#[test]
fn the_global_arena_is_the_binarys_allocator() {
    assert!(ARENA.used() > 0, "the test harness's first allocations");
}
