//! The `rlock` binary: parse, dispatch to the library, map errors to exit
//! codes. Everything else lives in the library.
//!
//! - `cli/`: the command line (clap), one file per subcommand or family;
//!   its unit test renders man/ and completions/ from it;
//! - `cmd/`: one function per subcommand, `cmd::run` dispatches;
//! - `setup.rs`: what the flags and the environment make of a connection,
//!   a request, a token;
//! - `out.rs`: stdout, which may have been closed at start;
//! - `readings.rs`: which command an `exec` or `rw` line runs;
//! - `errors.rs`: an error's one line, and clap's;
//! - `progress.rs` (the wait on stderr) and `render.rs` (status for people);
//! - `frame.rs` (one frame of `top`) and `screen.rs` (its terminal);
//! - `http.rs`: the requests and responses of `metrics --listen`;
//! - `arena.rs`: the global allocator, a bump arena for the first
//!   allocations.

// The entry point is ours, not std's: see `main` below. (The unit tests
// keep the test harness's.)
#![cfg_attr(not(test), no_main)]
#![cfg_attr(test, allow(dead_code))]

/// eprintln! that never panics: stderr may be a closed pipe (EPIPE) or a
/// full one, and a message is never worth a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod arena;
mod cli;
mod cmd;
mod errors;
mod escape;
mod frame;
mod http;
mod out;
mod progress;
mod readings;
mod render;
mod screen;
mod setup;

use std::io::Write;

use cli::{Acquire, Command, Exec, Rw};
use rlock::exit_code;

/// The process entry point, in place of std's. std's start-up costs ~80 µs
/// per run on a VM (measured: an empty `fn main` against the same binary
/// with this entry, 652 vs 575 µs at p10), more than anything else rlock
/// does before connecting: it reads /proc/self/maps to place the main
/// thread's stack guard and maps an alternate signal stack, for the
/// "stack overflow" message. What the rest of the program relies on is
/// kept here: SIGPIPE ignored (a closed stderr or stdout is an EPIPE, not
/// a death; the command gets SIGPIPE back at its default, see
/// exec/guard/spawn.rs), standard descriptors 0-2 opened on /dev/null when
/// closed (so that no socket of ours becomes stdout; a closed stdout is
/// remembered, see [`out::STDOUT_CLOSED`]), and stdout flushed at exit. std::env::args works without std's entry on Linux/glibc (it reads
/// them from the C start-up).
#[cfg(not(test))]
#[unsafe(no_mangle)]
extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    // SAFETY: plain syscalls, before any thread or descriptor of ours.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
            fd,
            events: 0,
            revents: 0,
        });
        if libc::poll(fds.as_mut_ptr(), 3, 0) >= 0 {
            for p in fds.iter().filter(|p| p.revents & libc::POLLNVAL != 0) {
                if libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) != p.fd {
                    libc::abort();
                }
                if p.fd == libc::STDOUT_FILENO {
                    out::STDOUT_CLOSED.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
    }
    let code = rlock_main();
    let _ = std::io::stdout().flush();
    libc::c_int::from(code)
}

fn rlock_main() -> u8 {
    // The keeper `acquire --keep` leaves behind: internal, never typed.
    if std::env::args_os().nth(1).as_deref() == Some(rlock::keep::KEEPER_ARG.as_ref()) {
        return rlock::keep::keeper_main().unwrap_or_else(|e| {
            say!("rlock: {e}");
            exit_code::USAGE
        });
    }
    // The releaser an exec's guard runs once rlock died: internal too.
    if std::env::args_os().nth(1).as_deref() == Some(rlock::exec::RELEASER_ARG.as_ref()) {
        return rlock::exec::releaser_main().unwrap_or_else(|e| {
            say!("rlock: {e}");
            exit_code::USAGE
        });
    }
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match cli::parse(&args) {
        Ok(cli) => cli,
        Err(e) => return errors::clap_exit(e),
    };
    if let Err(e) = readings::check(&args, &cli) {
        say!("rlock: {e}");
        return exit_code::USAGE;
    }
    let mut cli = cli;
    let conflict = match &cli.command {
        Command::Acquire(Acquire { lock, .. })
        | Command::Exec(Exec { lock, .. })
        | Command::Rw(Rw { lock, .. }) => lock.conflict_exit_code,
        _ => exit_code::BUSY,
    };
    let verbose = cli.global.verbose;
    let prefix = cli.global.prefix.clone();
    // `-E 0`: a wait that ends busy is a quiet success, so the wait says
    // nothing either (see `setup::waiting`).
    cli.global.busy_is_success = conflict == 0;
    match cmd::run(cli) {
        Ok(code) => code,
        Err(err) => {
            let lib = err.chain().find_map(|e| e.downcast_ref::<rlock::Error>());
            // `-E 0` makes busy a success: skip quietly, as flock -n does
            // (no cron mail for a run another host already does).
            let quiet_busy = conflict == 0
                && matches!(
                    lib,
                    Some(
                        rlock::Error::Busy { .. }
                            | rlock::Error::Timeout { .. }
                            | rlock::Error::Superseded { .. }
                    )
                );
            if !quiet_busy || verbose {
                say!("rlock: {}", errors::line(&err, &prefix));
            }
            lib.map_or(exit_code::INTERNAL, |e| exit_code::for_error(e, conflict))
        }
    }
}
