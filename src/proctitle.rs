//! The guards' names, as `ps`, `pgrep` and `pkill` see them.
//!
//! The one guard (`hold::guard`) is a fork of rlock or of a keeper without
//! an exec, named by the hold it guards: an exec's tree or a keeper's
//! cover. Unrenamed, it shows rlock's name and command line, and a `pkill -9
//! rlock` (which matches the name) or `pkill -9 -f rlock` (the command
//! line) meant for rlock kills the guard with it; then nothing is left to
//! kill the command's tree when the lease ends. So it takes a name and a
//! command line without "rlock" in either ([`rename`]).

/// Exec's guard: its name and its whole command line.
pub(crate) const EXEC_GUARD: &str = "rl-guard";

/// The keeper's guard. Its command line is this, then the keeper's
/// [`crate::keep::KEEPER_ARG`], by which an enclosing exec still tells it
/// for the keeper's (see `exec::tree::is_keeper`).
pub(crate) const KEEP_GUARD: &str = "rl-keepguard";

/// Room for all of /proc/self/stat: 52 fields of at most 20 digits, and a
/// name of at most 15 bytes.
const STAT_MAX: usize = 2048;

/// Rename this process: its name (comm, PR_SET_NAME, which keeps 15
/// bytes) is `args[0]`, its command line `args`, written NUL-separated over
/// the argv strings the kernel placed at exec, as setproctitle(3) does:
/// as much as fits, the rest of that area zeroed. /proc/PID/cmdline shows
/// that area, between the arg_start and arg_end of /proc/PID/stat. If the
/// stat cannot be read, only the name changes.
///
/// Allocates nothing and takes no lock (raw open and read into a buffer
/// on the stack): fine in a child forked from a process with threads.
///
/// # Safety
/// Only in a single-threaded process that never reads its own argv again
/// (`std::env::args`): the strings are overwritten in place.
pub(crate) unsafe fn rename(args: &[&[u8]]) {
    let mut comm = [0u8; 16];
    let first = args.first().copied().unwrap_or_default();
    let n = first.len().min(comm.len() - 1);
    comm[..n].copy_from_slice(&first[..n]);
    // SAFETY: plain syscall; `comm` is NUL-terminated (its last byte is
    // never written).
    unsafe { libc::prctl(libc::PR_SET_NAME, comm.as_ptr()) };
    let mut stat = [0u8; STAT_MAX];
    let Some((start, end)) = read_stat(&mut stat).and_then(arg_area) else {
        return;
    };
    // SAFETY: [start, end) is this process's argv area as the kernel
    // reports it: mapped and writable (the top of the initial stack). No
    // reference to it exists (std keeps raw pointers to the strings, and
    // the caller never reads them again), and the process has one thread.
    let area = unsafe { std::slice::from_raw_parts_mut(start as *mut u8, end - start) };
    write_title(args, area);
}

/// Read /proc/self/stat whole into `buf`; None if it cannot be, or does
/// not fit.
fn read_stat(buf: &mut [u8; STAT_MAX]) -> Option<&[u8]> {
    // SAFETY: plain syscall with a NUL-terminated path.
    let fd = unsafe {
        libc::open(
            c"/proc/self/stat".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    let mut len = 0;
    let whole = loop {
        // SAFETY: reads into the unused tail of `buf`.
        let n = unsafe { libc::read(fd, buf[len..].as_mut_ptr().cast(), buf.len() - len) };
        match usize::try_from(n) {
            Ok(0) => break true,
            Ok(n) => len += n,
            Err(_) if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {
            }
            Err(_) => break false,
        }
        if len == buf.len() {
            break false; // a truncated line could cut arg_end short
        }
    };
    // SAFETY: our own descriptor, opened above.
    unsafe { libc::close(fd) };
    whole.then_some(&buf[..len])
}

/// arg_start and arg_end (fields 48 and 49) of a /proc/PID/stat line, if
/// it has them and they make an area: zero where /proc hides them, and
/// absent before Linux 3.5.
fn arg_area(stat: &[u8]) -> Option<(usize, usize)> {
    // "pid (comm) state ppid ...": comm may hold spaces and ')'.
    let close = stat.iter().rposition(|&b| b == b')')?;
    let mut fields = stat[close + 1..]
        .split(u8::is_ascii_whitespace)
        .filter(|f| !f.is_empty());
    // The first field after the name is field 3: field n is the
    // (n - 3)th.
    let mut num = |skip: usize| -> Option<usize> {
        std::str::from_utf8(fields.nth(skip)?).ok()?.parse().ok()
    };
    let start = num(48 - 3)?;
    let end = num(0)?;
    (start > 0 && end > start).then_some((start, end))
}

/// Write `args` NUL-separated over `area`, as much as fits before its last
/// byte, and zero the rest: the area then ends in a NUL, so /proc shows
/// just the area (a non-NUL last byte has it read on into the environment,
/// as after a setproctitle that overflowed).
fn write_title(args: &[&[u8]], area: &mut [u8]) {
    let room = area.len().saturating_sub(1);
    let mut at = 0;
    for arg in args {
        for &b in arg.iter().chain(&[0]) {
            if at == room {
                break;
            }
            area[at] = b;
            at += 1;
        }
    }
    area[at..].fill(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stat line as Linux 6 writes it, with `name` as the comm and the
    /// argv area at 140736 to 140800.
    fn stat_line(name: &str) -> String {
        let mut fields: Vec<String> = (3..=52).map(|n| (n * 10).to_string()).collect();
        fields[0] = "S".into();
        fields[48 - 3] = "140736".into();
        fields[49 - 3] = "140800".into();
        format!("4242 ({name}) {}\n", fields.join(" "))
    }

    #[test]
    fn the_argv_area_is_read_from_fields_48_and_49() {
        assert_eq!(
            arg_area(stat_line("rlock").as_bytes()),
            Some((140_736, 140_800))
        );
        // A name with spaces and parentheses shifts no field.
        assert_eq!(
            arg_area(stat_line("a) 1 (2) 3").as_bytes()),
            Some((140_736, 140_800))
        );
    }

    #[test]
    fn a_hidden_short_or_empty_argv_area_is_none() {
        // Hidden (another user's process): zeros.
        let hidden = stat_line("x").replace("140736 140800", "0 0");
        assert_eq!(arg_area(hidden.as_bytes()), None);
        let empty = stat_line("x").replace("140736 140800", "140736 140736");
        assert_eq!(arg_area(empty.as_bytes()), None);
        // Before Linux 3.5 the line ends at field 44; a line cut short.
        let old: String = stat_line("x")
            .split(' ')
            .take(43)
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(arg_area(old.as_bytes()), None);
        assert_eq!(arg_area(b"4242 (x"), None);
        assert_eq!(arg_area(b""), None);
        // Not a number.
        let bad = stat_line("x").replace("140800", "14O800");
        assert_eq!(arg_area(bad.as_bytes()), None);
    }

    #[test]
    fn this_processs_argv_area_is_what_proc_shows_as_its_command_line() {
        let mut buf = [0u8; STAT_MAX];
        let stat = read_stat(&mut buf).expect("/proc/self/stat");
        let (start, end) = arg_area(stat).expect("arg_start and arg_end");
        let cmdline = std::fs::read("/proc/self/cmdline").unwrap();
        assert_eq!(end - start, cmdline.len());
    }

    #[test]
    fn the_title_replaces_the_whole_argv_area() {
        let mut area = *b"/usr/bin/rlock\0exec\0k\0--\0sh\0";
        write_title(&[EXEC_GUARD.as_bytes()], &mut area);
        assert!(area.starts_with(b"rl-guard\0"));
        assert!(area[EXEC_GUARD.len()..].iter().all(|&b| b == 0));

        let mut area = *b"rlock-keeper\0__keep\0";
        let title = [KEEP_GUARD.as_bytes(), crate::keep::KEEPER_ARG.as_bytes()];
        write_title(&title, &mut area);
        assert_eq!(&area, b"rl-keepguard\0__keep\0");
        // What is_keeper reads.
        assert_eq!(area.split(|&b| b == 0).nth(1), Some(&b"__keep"[..]));
    }

    #[test]
    fn a_title_longer_than_the_area_is_cut_and_still_ends_in_nul() {
        let mut area = *b"rlock\0";
        write_title(&[KEEP_GUARD.as_bytes(), b"__keep"], &mut area);
        assert_eq!(&area, b"rl-ke\0");
        let mut area = [b'x'; 1];
        write_title(&[b"rl-guard"], &mut area);
        assert_eq!(area, [0]);
    }

    #[test]
    fn no_guard_name_matches_a_pattern_for_rlock() {
        // pkill's pattern is a regex over the name (15 bytes) or the
        // command line: neither may contain "rlock".
        for name in [EXEC_GUARD, KEEP_GUARD] {
            assert!(!name.contains("rlock"), "{name}");
            assert!(name.len() <= 15, "{name} is cut by PR_SET_NAME");
        }
        assert!(!crate::keep::KEEPER_ARG.contains("rlock"));
    }
}
