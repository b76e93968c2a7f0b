//! Descriptor chores that the exec guard and the keeper share.

/// Point stdin, stdout and stderr at /dev/null: a process that has cut
/// itself off from its caller (exec's guard, the keeper) holds no end of
/// the caller's pipes or terminal, and a stray write still succeeds. If
/// /dev/null cannot be opened, stdio is left as it is.
///
/// Not close-on-exec: these are the process's standard descriptors, for
/// whatever it runs next too.
///
/// # Safety
/// Only in a process that owns descriptors 0-2 (the guard, the keeper once
/// detached): nothing else may be using what they were.
pub(crate) unsafe fn stdio_to_null() {
    // SAFETY: plain syscalls; the caller owns descriptors 0-2.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            if null > 2 {
                libc::close(null);
            }
        }
    }
}
