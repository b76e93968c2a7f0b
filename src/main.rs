//! The `rlock` binary: parse, dispatch to the library, map errors to exit
//! codes. Everything else lives in the library.

// The entry point is ours, not std's: see `main` below. (The unit tests
// keep the test harness's.)
#![cfg_attr(not(test), no_main)]
#![cfg_attr(test, allow(dead_code))]

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::sync::atomic::{AtomicBool, Ordering};

mod cli;
mod progress;
mod render;

use clap::Parser;
use cli::{Cli, Command, Global, KeepOpts, LockOpts, RunOpts, RwMode};
use rlock::duration::human;
use rlock::exec::{Event, HELD_ENV, KillCause, Spec};
use rlock::{
    ConnectOptions, HolderInfo, Lease, Locker, Mode, Released, Request, Token, Wait, exit_code,
};

/// eprintln! that never panics: stderr may be a closed pipe (EPIPE) or a
/// full one, and a message is never worth a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// rlock was started with stdout closed (`rlock acquire k >&-`). The
/// descriptor is /dev/null since (see `main`), where every write succeeds:
/// whatever rlock prints there is lost, and a token printed there would
/// leave a lock nobody can release. So printing fails as on a closed pipe
/// (exit 70), and `acquire` asks for nothing.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// stdout, unless it was closed when rlock started (see [`STDOUT_CLOSED`]).
fn stdout() -> std::io::Result<std::io::StdoutLock<'static>> {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::BrokenPipe,
            "it was closed when rlock started",
        ));
    }
    Ok(std::io::stdout().lock())
}

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
/// remembered, see [`STDOUT_CLOSED`]), and stdout flushed at exit. std::env::args works without std's entry on Linux/glibc (it reads
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
                    STDOUT_CLOSED.store(true, Ordering::Relaxed);
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
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_exit(e),
    };
    let conflict = match &cli.command {
        Command::Acquire { lock, .. } | Command::Exec { lock, .. } | Command::Rw { lock, .. } => {
            lock.conflict_exit_code
        }
        _ => exit_code::BUSY,
    };
    let verbose = cli.global.verbose;
    let prefix = cli.global.prefix.clone();
    // `-E 0`: a wait that ends busy is a quiet success, so the wait says
    // nothing either (see `waiting`).
    BUSY_IS_SUCCESS.store(conflict == 0, std::sync::atomic::Ordering::Relaxed);
    match run(cli) {
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
                // One line, even when a cause spans several (redis-rs'
                // parse errors on a server that is not Redis do).
                let text = format!("{err:#}");
                let text: Vec<&str> = text
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect();
                say!("rlock: {}", explain(lib, &text.join(" "), &prefix));
            }
            lib.map_or(exit_code::INTERNAL, |e| exit_code::for_error(e, conflict))
        }
    }
}

/// An error's one line, with what to do about it where the library's
/// words alone leave a new user stuck.
fn explain(lib: Option<&rlock::Error>, text: &str, prefix: &str) -> String {
    let Some(e) = lib else {
        return text.to_string();
    };
    match e {
        rlock::Error::Unavailable { cause, .. }
            if cause.kind() == redis::ErrorKind::Io && text.contains("Connection refused") =>
        {
            format!(
                "{text}; is Redis running there? --url URL (or RLOCK_URL) points rlock at another"
            )
        }
        rlock::Error::Unavailable { cause, .. } if cause.code() == Some("NOPERM") => format!(
            "{text}; the user's ACL must allow the keys under --prefix {prefix:?} (~{prefix}*) \
             and rlock's commands (docs/deployments.md: \"TLS and least-privilege ACLs\")"
        ),
        // WAIT's shortfall (`--min-replicas`): redis-rs' own words for the
        // made-up cause ("too few replicas - Client") say nothing more.
        rlock::Error::Unavailable { cause, .. }
            if cause.kind() == redis::ErrorKind::Client && text.ends_with(" - Client") =>
        {
            let text = text.trim_end_matches(" - Client");
            format!("{text}; are the replicas connected? (`rlock doctor` checks)")
        }
        rlock::Error::Usage(_) => cli_terms(text),
        rlock::Error::Protocol(_) if text.contains("Parse error") => {
            "the server did not answer as Redis does (the URL may point at another \
             service's port; check --url or RLOCK_URL)"
                .to_string()
        }
        _ => text.to_string(),
    }
}

/// The library's usage errors name its own fields and values; a user of
/// the command line knows them as flags.
fn cli_terms(text: &str) -> String {
    const TERMS: [(&str, &str); 7] = [
        ("release_with's min_hold", "--min-hold"),
        ("Request::min_hold", "--min-hold"),
        ("Request::supersede", "--supersede"),
        ("Request::limit", "--limit"),
        ("ConnectOptions::urls", "--url"),
        ("Wait::No", "-n"),
        ("Wait::For(0)", "-w 0"),
    ];
    TERMS
        .iter()
        .fold(text.to_string(), |t, (lib, flag)| t.replace(lib, flag))
}

/// Help and version go to stdout with 0; every usage error is one line on
/// stderr with exit code 64 (clap's own default would be 2).
fn clap_exit(e: clap::Error) -> u8 {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return exit_code::OK;
    }
    // clap's message spans several lines (error, details, usage); keep the
    // part before the usage block, folded into one line.
    let text = e.to_string();
    let line: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
        .collect();
    // It may quote what was typed, a URL with a password included.
    let line = rlock::conn::redact_text(&line.join(" "));
    say!(
        "rlock: {} (see rlock --help)",
        line.trim_start_matches("error: ")
    );
    exit_code::USAGE
}

/// Write `text` to stdout. Not print!, which panics when stdout is a
/// closed pipe (`rlock status k | true`): that is an error like any other.
fn print(text: &str) -> anyhow::Result<()> {
    stdout()
        .and_then(|mut out| out.write_all(text.as_bytes()).and_then(|_| out.flush()))
        .map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}"))
}

fn connect(g: &Global) -> anyhow::Result<Locker> {
    Ok(Locker::connect(&options(g), &g.prefix)?)
}

fn options(g: &Global) -> ConnectOptions {
    ConnectOptions {
        urls: g
            .url
            .iter()
            .map(|u| u.trim().to_string())
            .filter(|u| !u.is_empty())
            .collect(),
        password: std::env::var("RLOCK_PASSWORD")
            .ok()
            .filter(|p| !p.is_empty()),
        connect_timeout: g.connect_timeout.0,
        cluster: g.cluster,
        sentinel: g.sentinel.clone(),
        min_replicas: g.min_replicas,
        tls: rlock::conn::Tls {
            ca: g.tls_ca.clone(),
            cert: g.tls_cert.clone(),
            key: g.tls_key.clone(),
        },
    }
}

fn request(lock: &LockOpts) -> Request {
    let mut req = Request::new(lock.ttl.0);
    req.min_hold = lock.min_hold.map_or(std::time::Duration::ZERO, |d| d.0);
    req.supersede = lock.supersede;
    req.wait = match (lock.no_wait, lock.wait) {
        (true, _) => Wait::No,
        (false, Some(d)) => Wait::For(d.0),
        (false, None) => Wait::Forever,
    };
    req
}

/// `acquire`, and `rw` without a command: print the token and exit;
/// with `keep`, leave a keeper behind.
fn print_token(
    g: &Global,
    key: &str,
    mut req: Request,
    keep: Option<rlock::keep::Keep>,
) -> anyhow::Result<u8> {
    req.check()?;
    // `status` names the holder: this process exits at once, so the script
    // that runs it (as --keep finds it; the watched process with --keep).
    req.info.pid = match &keep {
        Some(k) => k.watched.process_id() as u32,
        None => rlock::keep::script_pid(),
    };
    if let Err(e) = stdout() {
        // Nobody could learn the token: do not take the lock at all.
        anyhow::bail!("cannot write the token to stdout: {e}; nothing acquired");
    }
    let mut locker = connect(g)?;
    let lease = acquire(g, &mut locker, key, req)?;
    if g.verbose {
        say!(
            "rlock: acquired {key:?} (fence {}, ttl {})",
            lease.fence,
            human(lease.ttl)
        );
    }
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{}", lease.token.as_str())
        .and_then(|_| out.flush())
        .is_err()
    {
        // Nobody can learn the token: do not leave the lock held, not even
        // for a --min-hold (None: given back at once, as a failed exec's).
        let _ = locker.release_with(key, &lease.token, false, None);
        anyhow::bail!("cannot write the token to stdout; lock released");
    }
    if keep.is_none() && lease.count > 1 {
        // A re-entry of a kept lock (the script exported the token of its
        // `acquire --keep`): the keeper keeps this hold too, so that the
        // script's `release` of it never counts as the keeper's own.
        let _ = rlock::keep::adopt(&locker.name(key)?, &lease.token, locker.timeout());
    }
    if let Some(keep) = keep {
        let mut program = std::process::Command::new("/proc/self/exe");
        program.arg0("rlock-keeper").arg(rlock::keep::KEEPER_ARG);
        match rlock::keep::spawn(program, &options(g), &g.prefix, &lease, &keep) {
            Ok(started) => {
                if g.verbose {
                    match started {
                        rlock::keep::Started::Keeper(pid) => say!(
                            "rlock: keeper pid {pid} keeps {key:?} while pid {} lives",
                            keep.watched.process_id()
                        ),
                        rlock::keep::Started::Already => {
                            say!("rlock: a keeper of this token already keeps {key:?}")
                        }
                    }
                }
            }
            Err(e) => {
                // At once, whatever --min-hold: nothing was done with it.
                let _ = locker.release_with(key, &lease.token, false, None);
                return Err(anyhow::Error::new(e).context("--keep: lock released"));
            }
        }
    }
    Ok(exit_code::OK)
}

/// What `--keep` watches, checked before anything is acquired.
fn keeper(keep: &KeepOpts) -> anyhow::Result<Option<rlock::keep::Keep>> {
    if !keep.keep {
        return Ok(None);
    }
    let watched = match keep.keep_while {
        Some(pid) => rlock::keep::Watched::pid(pid)?,
        None => rlock::keep::Watched::caller()?,
    };
    Ok(Some(rlock::keep::Keep {
        watched,
        on_lost: keep.on_lost.unwrap_or(cli::OnLost::Term).into(),
        grace: keep
            .grace
            .map_or(std::time::Duration::from_secs(10), |g| g.0),
    }))
}

/// `rlock exec k --tll 5s -- true`: an option rlock does not know, before
/// the `--`, became the command (`--tll`, exit 127). When a `--` follows
/// the key, everything between the key and it is rlock's options: a
/// command that starts with a dash before the first `--` on the command
/// line is such an option, mistyped. (`rlock exec k -- --cmd -- x` runs
/// `--cmd`: it comes after the first `--`.)
fn mistyped_option(command: &[std::ffi::OsString]) -> Result<(), rlock::Error> {
    let Some(first) = command.first() else {
        return Ok(());
    };
    if !first.to_string_lossy().starts_with('-') {
        return Ok(());
    }
    let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let Some(dd) = raw.iter().position(|a| a == "--") else {
        return Ok(());
    };
    if raw[dd + 1..] == *command {
        return Ok(());
    }
    Err(rlock::Error::Usage(format!(
        "unknown option {:?} (everything between the key and `--` is rlock's options; \
         see --help)",
        first.to_string_lossy()
    )))
}

/// `exec`, and `rw` with a command.
fn exec(
    g: &Global,
    key: &str,
    mut req: Request,
    run: &RunOpts,
    command: &[std::ffi::OsString],
) -> anyhow::Result<u8> {
    mistyped_option(command)?;
    req.check()?;
    req.info = HolderInfo::current(Some(rlock::conn::redact_command(command)));
    let mut locker = connect(g)?;
    req.reenter = inherited(&locker, key)?;
    let spec = Spec {
        program: command[0].clone(),
        args: command[1..].to_vec(),
        on_lost: run.on_lost.into(),
        grace: run.grace.0,
        kill_leftovers: run.kill_leftovers,
    };
    // A loss is reported once, when it happens; the exit code says it again.
    let mut reported = false;
    let progress = waiting(g, key);
    let result = rlock::exec::run(
        &mut locker,
        key,
        &req,
        &spec,
        &mut |busy| progress.update(busy),
        &mut |ev| match ev {
            Event::Acquired(lease) => {
                // Before the command writes anything.
                progress.finish();
                if g.verbose {
                    say!(
                        "rlock: acquired {key:?} (fence {}, ttl {})",
                        lease.fence,
                        human(lease.ttl)
                    )
                }
            }
            Event::Lost { why, action } => {
                reported = true;
                say!("rlock: lock {key:?} lost: {why}; {action}")
            }
            Event::Forwarded(sig) if g.verbose => {
                say!("rlock: passed signal {sig} to the command")
            }
            Event::Killed { cause, command } if !g.quiet => {
                let what = if command {
                    "the command"
                } else {
                    "what the command left running"
                };
                let grace = human(run.grace.0);
                match cause {
                    KillCause::Grace(sig) => say!(
                        "rlock: {what} did not exit within {grace} of {} (--grace); sent SIGKILL",
                        signal_name(sig)
                    ),
                    KillCause::Again(sig) => {
                        say!(
                            "rlock: a second {}: sent SIGKILL to {what}",
                            signal_name(sig)
                        )
                    }
                    KillCause::Leftovers => say!(
                        "rlock: what the command left running did not exit within {grace} of \
                         SIGTERM (--kill-leftovers); sent SIGKILL"
                    ),
                }
            }
            Event::Unconfirmed(d) if !g.quiet => say!(
                "rlock: lock {key:?}: no renewal confirmed for {}; the command runs on \
                 (--on-lost ignore) and renewing goes on",
                human(d)
            ),
            Event::ReleasedLate(margin) => say!(
                "rlock: lock {key:?}: Redis answered the release only after the lease had \
                 ended, but the command and everything it started had exited {} before \
                 the lease's end; its exit status stands",
                human(margin)
            ),
            Event::ReleaseFailed(e) => {
                say!("rlock: could not release {key:?} (it frees itself when its TTL ends): {e}")
            }
            _ => {}
        },
    );
    progress.finish();
    let finished = match result {
        Err(rlock::Error::Lost { .. }) if reported => return Ok(exit_code::LOST),
        r => r?,
    };
    if g.verbose {
        say!(
            "rlock: released {key:?}; the command exited with {}",
            finished.code
        );
    }
    if finished.interactive {
        rlock::exec::tty::reraise_in_job(finished.signal);
    }
    Ok(finished.code)
}

/// "SIGTERM" for 15: the signals rlock passes on by name, others by number.
fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGQUIT => "SIGQUIT".into(),
        libc::SIGUSR1 => "SIGUSR1".into(),
        libc::SIGUSR2 => "SIGUSR2".into(),
        _ => format!("signal {sig}"),
    }
}

/// Acquire (or re-enter, inside an `rlock exec` of the same lock), with
/// INT/TERM/HUP/QUIT ending the wait cleanly.
fn acquire(g: &Global, locker: &mut Locker, key: &str, mut req: Request) -> anyhow::Result<Lease> {
    req.reenter = inherited(locker, key)?;
    let cancel = rlock::Cancel::new();
    std::thread::scope(|s| {
        let _guard = rlock::signals::cancel_on_signals(s, &cancel)?;
        let progress = waiting(g, key);
        let lease = locker.acquire(key, &req, Some(&cancel), &mut |b| progress.update(b));
        progress.finish();
        Ok(lease?)
    })
}

/// The token to try re-entering `key` with (see `reentry_token`); used
/// only if it holds the lock, else the acquire takes a fresh token.
fn inherited(locker: &Locker, key: &str) -> anyhow::Result<Option<Token>> {
    Ok(rlock::exec::reentry_token(
        std::env::var(HELD_ENV).ok().as_deref(),
        std::env::var("RLOCK_TOKEN").ok().as_deref(),
        &locker.name(key)?,
    ))
}

/// The token `release`, `renew` and `check` act with: --token, else the
/// one RLOCK_HELD records for the lock, else RLOCK_TOKEN (see
/// `rlock::exec::owner_token`).
fn owner_token(g: &Global, key: &str, flag: Option<&str>) -> anyhow::Result<Token> {
    Ok(rlock::exec::owner_token(
        flag,
        std::env::var(HELD_ENV).ok().as_deref(),
        std::env::var("RLOCK_TOKEN").ok().as_deref(),
        &rlock::lock::LockName::new(&g.prefix, key)?,
    )?)
}

/// `-E 0` was given (see `main`).
static BUSY_IS_SUCCESS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Shows on stderr whom we wait for (unless -q): see progress.rs. With
/// `-E 0` and stderr not a terminal (cron, CI), nothing either, as flock
/// prints nothing while it waits: a wait that then ends busy exits 0, and
/// a line on stderr would turn each such run into a cron mail. (On a
/// terminal the live line is erased when the wait ends.) `-v` still shows
/// it.
fn waiting<'a>(g: &Global, key: &'a str) -> progress::Progress<'a> {
    use std::io::IsTerminal;
    let silent = BUSY_IS_SUCCESS.load(std::sync::atomic::Ordering::Relaxed)
        && !g.verbose
        && !std::io::stderr().is_terminal();
    progress::Progress::new(key, g.quiet || silent, g.verbose)
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    let g = &cli.global;
    // Bad input is reported as such, before any connection is tried.
    if let Some(key) = cli.command.key() {
        rlock::lock::LockName::new(&g.prefix, key)?;
    }
    match &cli.command {
        Command::Acquire {
            key,
            lock,
            slots,
            keep,
        } => {
            let mut req = request(lock);
            req.limit = slots.limit;
            let keep = keeper(keep)?;
            print_token(g, key, req, keep)
        }
        Command::Exec {
            key,
            lock,
            slots,
            run,
            flock,
            command,
        } => {
            flock.refuse(key, command).map_err(rlock::Error::Usage)?;
            let mut req = request(lock);
            req.limit = slots.limit;
            if flock.shared {
                req.mode = Mode::Read;
            }
            exec(g, key, req, run, &flock.command(command))
        }
        Command::Rw {
            mode,
            key,
            lock,
            run,
            command,
        } => {
            let mut req = request(lock);
            req.mode = match mode {
                RwMode::Read => Mode::Read,
                RwMode::Write => Mode::Write,
            };
            if command.is_empty() {
                print_token(g, key, req, None)
            } else {
                exec(g, key, req, run, command)
            }
        }
        Command::Release {
            key,
            token,
            min_hold,
        } => {
            let token = owner_token(g, key, token.token.as_deref())?;
            let mut locker = connect(g)?;
            let hold = min_hold.map_or(std::time::Duration::ZERO, |d| d.0);
            match rlock::keep::release(&mut locker, key, &token, false, Some(hold))? {
                Released::Released => {
                    if g.verbose {
                        say!("rlock: released {key:?}");
                    }
                }
                Released::StillHeld(n) => {
                    if !g.quiet {
                        say!(
                            "rlock: {key:?} is still held by this token ({n} {} left)",
                            if n == 1 { "hold" } else { "holds" }
                        );
                    }
                }
                Released::NotHeld => {
                    if !g.quiet {
                        say!(
                            "rlock: {key:?} was not held (already released or expired); nothing to do"
                        );
                    }
                }
            }
            Ok(exit_code::OK)
        }
        Command::Renew { key, token, ttl } => {
            let token = owner_token(g, key, token.token.as_deref())?;
            rlock::lock::check_ttl(ttl.0)?;
            let mut locker = connect(g)?;
            locker.renew(key, &token, ttl.0)?;
            if g.verbose {
                say!(
                    "rlock: renewed {key:?} for at least {ttl} (a renewal never shortens a lease)"
                );
            }
            Ok(exit_code::OK)
        }
        Command::Check { key, token, json } => {
            let token = owner_token(g, key, token.token.as_deref())?;
            let mut locker = connect(g)?;
            let held = locker.check(key, &token);
            let mut printed = Ok(());
            if *json {
                let out = match &held {
                    Ok(h) => {
                        serde_json::json!({"held": true, "ttl_ms": rlock::duration::millis(h.ttl), "fence": h.fence})
                    }
                    Err(rlock::Error::Lost { .. }) => {
                        serde_json::json!({"held": false, "why": "gone"})
                    }
                    Err(rlock::Error::NotOwner { .. }) => {
                        serde_json::json!({"held": false, "why": "another owner"})
                    }
                    Err(_) => serde_json::Value::Null,
                };
                if !out.is_null() {
                    printed = print(&format!("{out}\n"));
                }
            }
            // The lock's answer comes first: its exit code says more than
            // a closed stdout's.
            let held = held?;
            printed?;
            if g.verbose {
                say!(
                    "rlock: {key:?} is held by this token for {} more (fence {})",
                    human(held.ttl),
                    held.fence
                );
            }
            Ok(exit_code::OK)
        }
        Command::Status { key, json } => {
            let mut locker = connect(g)?;
            let st = locker.status(key)?;
            if *json {
                print(&(serde_json::to_string(&st)? + "\n"))?;
            } else {
                print(&render::status(&st))?;
            }
            Ok(exit_code::OK)
        }
        Command::Doctor { ttl, json } => {
            rlock::lock::check_ttl(ttl.0)?;
            let report = rlock::doctor::run(&options(g), &g.prefix, ttl.0)?;
            let out = if *json {
                serde_json::to_string(&report)? + "\n"
            } else {
                report.render()
            };
            print(&out)?;
            Ok(if report.safe {
                exit_code::OK
            } else {
                exit_code::UNSAFE
            })
        }
        Command::List { pattern, json } => {
            let mut locker = connect(g)?;
            let all = locker.list(pattern)?;
            if *json {
                print(&(serde_json::to_string(&all)? + "\n"))?;
            } else {
                print(&all.iter().map(render::status).collect::<String>())?;
            }
            Ok(exit_code::OK)
        }
    }
}
