//! `rlock exec`: run a command under a lock.
//!
//! # The invariant
//!
//! Unless `--on-lost ignore`, every process of the command's tree — the
//! command, its children, and whatever left its process group or daemonized
//! — is dead before the lease can expire on the server. The lock is held
//! (and renewed) until the last of them has exited, unless
//! `--kill-leftovers` ends them when the command itself exits.
//!
//! # Who enforces it
//!
//! Three processes take part: rlock, the command, and the *guard* (see
//! `guard/`), a small process forked by rlock before anything else, which
//! is the command's parent, a child subreaper for its whole tree, in a
//! process group of its own, and holds a CLOCK_BOOTTIME timer at the *kill
//! deadline*. The kill deadline is `kill_point(valid_until)`: the lease's
//! validity deadline (request sent + TTL − drift, on [`crate::clock`]) minus
//! a margin for the kernel to tear processes down. rlock sends it before
//! the command starts and after every confirmed renewal; it only ever moves
//! to a later confirmed validity, or earlier on a loss.
//!
//! For each way rlock can fail to act, what still stops the tree in time:
//! - **rlock healthy, lock lost** (renewal finds it gone or taken, or no
//!   renewal confirmed with TTL/3 of validity left, e.g. Redis frozen or
//!   unreachable): the supervisor (`supervisor.rs`) SIGTERMs the tree
//!   itself and sets the guard's deadline to min(now + `--grace`, kill
//!   deadline); at that point both processes SIGKILL the tree. What to do
//!   and when is decided by the hold core (`crate::hold`: a pure
//!   function of state, event and time, unit-tested), which the
//!   supervisor drives with the real clock, signals and Redis.
//! - **rlock SIGKILLed or crashed**: the guard sees its socket close and
//!   SIGKILLs the tree at once; the command also has PR_SET_PDEATHSIG from
//!   the guard. Once the guard has no child left (it is the tree's
//!   subreaper, so none can be elsewhere) and rlock is dead (it closed its
//!   end without setting the shared page's "finished"), it gives back
//!   rlock's holds, so that the lock passes on at once rather than when
//!   the lease ends: it runs this binary as a short-lived releaser
//!   (`hold/guard/release.rs`) with the settings rlock sent it after the
//!   grant; the guard itself runs no Redis client (a fork of a process
//!   that may have had threads). Killed *before* the go (waiting, or
//!   between the grant and the go), rlock has started nothing: if it had
//!   told the guard (`take::Told`) the guard runs the releaser at once.
//!   The holds are those `release` below gives back, so a re-entered exec
//!   gives back its own only; a release after the lease ended or the lock
//!   was lost finds its token holding nothing and frees nothing else
//!   (lua/release.lua).
//!   Killed after the tree's end and before its own release, too: the
//!   guard reports the empty tree and stays until rlock's end closes.
//!   A live rlock that closes the socket itself sets "finished" first, so
//!   the guard never releases beside it. Without [`release_if_killed`] (a
//!   library caller whose binary has no releaser) the lease ends with its
//!   TTL.
//! - **rlock stopped** (SIGSTOP, Ctrl-Z of its job), **starved**, or
//!   **blocked** (a full stderr pipe, a hung write): it sets no new
//!   deadline on the page it shares with the guard, so the guard's timer
//!   fires at the last kill deadline and the guard SIGKILLs the tree. The
//!   renewer runs on its own thread and moves the deadline directly, so a
//!   supervisor blocked on stderr cannot hold the command's kill back, nor
//!   keep it alive past a confirmed lease.
//!   That thread is started by the supervisor when the first renewal is due
//!   (TTL/3 after the grant's request) or before the supervisor reports
//!   anything (a report may block), whichever comes first (see
//!   `renew.rs`): a command that ends sooner costs no thread. Until it
//!   starts, the guard holds the kill deadline sent before the command
//!   started, exactly as when renewals fail; a renewer that cannot start
//!   is a renewer that confirms nothing, and the rules above apply.
//! - **the guard stopped or starved** (SIGSTOP cannot be ignored; what
//!   rlock sends it then waits, or is dropped on a full socket; the
//!   deadline is on the page, read the moment it runs): rlock needs
//!   nothing from it to renew or to kill. The supervisor waits for the
//!   guard's "started" report in its poll loop, not in a blocking read
//!   (which, with the guard stopped between the command's exec and that
//!   report, left the command running unrenewed past its lease); it sends
//!   a loss's SIGTERM and SIGKILL through its own walk of the guard's tree;
//!   and a guard that reads the go to start the command only after the
//!   kill deadline sent with it does not start it. rlock and the guard both stopped
//!   leave nothing to act (docs/guide.md, "Limits").
//! - **machine suspended, VM paused**: deadlines are on CLOCK_BOOTTIME,
//!   which counts the suspended time, so the guard's timer fires first thing
//!   after resume (the processes may run for a scheduling quantum before it
//!   does: nothing short of a cgroup freezer can stop that).
//! - **interactive use**: the command gets its own process group exactly as
//!   without a terminal (made the terminal's foreground group, see [`tty`]),
//!   so every rule above holds unchanged.
//! - **descendants that leave the group or daemonize**: the guard is their
//!   subreaper; kills walk the guard's descendants, not just a group (see
//!   `tree.rs`), and "the tree is empty" is "the guard has no children"
//!   but keepers of `acquire --keep` (`tree::is_keeper`), which end with
//!   the process they watch, not with the command.
//! - **the guard itself killed** (it is internal, and named `rl-guard` so
//!   that no pattern for rlock matches it, see `crate::proctitle`; but a
//!   `kill -9` of its pid reaches it): the command dies by
//!   PR_SET_PDEATHSIG, and the rest of the tree, whatever its group, is
//!   re-parented to rlock, a child subreaper while it runs. rlock SIGKILLs
//!   and reaps every descendant it has, and releases the lock only once
//!   none is left alive (else the lease ends with its TTL); see
//!   `guard_killed`. rlock and the guard killed *together* (`kill -9` of
//!   both pids) leave the grandchildren to init: nothing is left to kill
//!   them, and the lease expires under them (docs/guide.md, "Limits").
//!
//! Beyond the command, the grant itself: acquire never returns a lease
//! whose validity already passed (see `Node::acquire_new` in
//! lock/node/acquire.rs); a nested exec of the same lock re-enters, and
//! the outermost exec gives back every hold of its token at the end, so a
//! crashed inner exec cannot keep the lock held.
//!
//! # Signal policy
//!
//! These signals received by rlock are passed on to every process of the
//! command's tree: [`FORWARDED`], but for those ignored when rlock started
//! (nohup, a script's `cmd &`), which rlock does not take at all (see
//! [`crate::signals`]). While waiting for the lock, INT, TERM,
//! HUP and QUIT end the wait instead (exit 128+N, nothing held or queued)
//! and USR1/USR2 are dropped. After a forwarded INT/TERM/HUP/QUIT the
//! command has `--grace` to exit, then the tree gets SIGKILL; a second INT
//! or TERM escalates at once. rlock takes signals through a signalfd
//! ([`crate::signals`]) and changes no disposition, so the command starts
//! with the dispositions and mask rlock was started with. The signalfd is
//! read by a thread only while a wait for the lock blocks; a first,
//! bounded, attempt without a thread leaves its signals pending until it
//! returns (see `acquire` below), and once the command runs the supervisor
//! polls it with the guard's socket (`supervisor.rs`).

mod guard;
mod renew;
mod supervisor;
mod take;
pub(crate) mod tree;
pub mod tty;

use std::ffi::OsString;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32};
use std::time::Duration;

use crate::clock::BootTime;
use crate::lock::reentry::{held_for_command, held_with};
use crate::{Busy, Error, Lease, Locker, Loss, Release, Released, Request, Result, exit_code};

pub use crate::hold::{KillCause, OnLost};
pub use crate::lock::reentry::{HELD_ENV, owner_token, reentry_token};
pub use guard::{RELEASER_ARG, Releaser, release_if_killed, releaser_main};
pub use tree::is_ancestor;

pub(crate) use crate::hold::kill_point;
use guard::guard_killed;
use guard::{Guard, Launch};
use renew::Shared;
use supervisor::Supervisor;
use take::{acquire, ends_wait};

/// Signals rlock passes on to the command once it runs.
pub const FORWARDED: [i32; 6] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// The command to run and how to treat it.
#[derive(Clone, Debug)]
pub struct Spec {
    /// The command to run (looked up in PATH).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// What to do to it if the lock is lost.
    pub on_lost: OnLost,
    /// How long after SIGTERM before SIGKILL.
    pub grace: Duration,
    /// When the command exits, end what it left running (SIGTERM, SIGKILL
    /// after `grace`) instead of holding the lock until it exits too.
    pub kill_leftovers: bool,
    /// Hold the lock at most this long from the grant: then every process
    /// of the command gets SIGTERM (SIGKILL after `grace`), the lock is
    /// released, and [`run`] returns [`exit_code::OVERRAN`] (124).
    pub max_hold: Option<Duration>,
    /// The locks enclosing `rlock exec`s hold, as [`HELD_ENV`] told this
    /// process: the locks of a set re-enter with them, and the command gets
    /// them with this one's added.
    pub held: Option<String>,
    /// The token the caller exported (RLOCK_TOKEN as this process found
    /// it), passed on in the command's [`HELD_ENV`] (see
    /// `lock::reentry::held_for_command`).
    pub exported: Option<String>,
}

/// Things worth telling the user while the command runs.
#[derive(Debug)]
pub enum Event<'a> {
    /// The lock is held; the command is about to start.
    Acquired(&'a Lease),
    /// The lock was lost; what was done about it.
    Lost {
        /// What was seen.
        why: &'a str,
        /// What was done to the command.
        action: &'a str,
    },
    /// A signal was passed on to the command.
    Forwarded(i32),
    /// rlock sent SIGKILL to the command's tree. Not reported after a loss,
    /// whose [`Event::Lost`] said that SIGKILL would follow.
    Killed {
        /// Why.
        cause: KillCause,
        /// The command itself still ran; else only what it left running
        /// did (it had exited).
        command: bool,
    },
    /// The lock could not be released; it frees itself when its TTL ends.
    ReleaseFailed(&'a Error),
    /// `--on-lost ignore`: no renewal confirmed for this long; the command
    /// runs on, and renewing goes on too.
    Unconfirmed(Duration),
    /// The command (or what it left running) held the lock for
    /// [`Spec::max_hold`]: SIGTERM was sent to every process of it, SIGKILL
    /// follows after `grace` if any is left.
    Overran(Duration),
    /// The release was answered only after the lease's validity deadline,
    /// and found the lock gone (or taken), but every process of the command
    /// had exited this long before that deadline: not a loss, the exit
    /// status is the command's.
    ReleasedLate(Duration),
}

/// How the command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Finished {
    /// rlock's exit code: the command's, or 128+N if signal N killed it.
    pub code: u8,
    /// The signal that killed the command, if one did.
    pub signal: Option<i32>,
    /// The command owned rlock's terminal (see [`tty`]).
    pub interactive: bool,
    /// It ran past [`Spec::max_hold`] and was stopped (`code` is then
    /// [`exit_code::OVERRAN`]).
    pub overran: bool,
}

/// Acquire `key` as `req` says, run `spec` under the lock (renewing it,
/// forwarding signals, enforcing the lock-loss policy), release it once no
/// process of the command is left, and say how the command ended (rlock's
/// exit code: the command's, or 128+N if signal N killed it). A lost lock
/// is [`Error::Lost`].
///
/// Call it with no other thread running (as the binary does), or with
/// [`FORWARDED`] blocked in every other thread: rlock takes those signals
/// through a signalfd. Call it from a process with no children of its own
/// either: while it runs the process is a child subreaper, and should the
/// guard be killed, every descendant of the process is killed and reaped.
pub fn run(
    locker: &mut Locker,
    key: &str,
    req: &Request,
    spec: &Spec,
    on_wait: &mut dyn FnMut(&Busy),
    on_event: &mut dyn FnMut(Event),
) -> Result<Finished> {
    run_set(locker, &[key.to_string()], req, spec, on_wait, on_event)
}

/// [`run`] under several locks at once (`rlock exec a b -- cmd`): all are
/// taken (in the canonical order, one wait for the set: see
/// [`crate::lock::set`]) before the command starts, each renewed, and all
/// released after it; a loss of any one is a loss ([`Error::Lost`] names
/// that lock). The first key named is the one RLOCK_KEY, RLOCK_TOKEN and
/// RLOCK_FENCE speak of; RLOCK_FENCES lists `key=fence` for every lock.
pub fn run_set(
    locker: &mut Locker,
    keys: &[String],
    req: &Request,
    spec: &Spec,
    on_wait: &mut dyn FnMut(&Busy),
    on_event: &mut dyn FnMut(Event),
) -> Result<Finished> {
    crate::lock::set::check_keys(keys)?;
    let key = keys[0].as_str();
    let lock = locker.name(key)?;
    let names = keys
        .iter()
        .map(|k| locker.name(k))
        .collect::<Result<Vec<_>>>()?;
    let term = tty::Terminal::open();
    let interactive =
        term.as_ref().is_some_and(tty::Terminal::ours) && !tty::started_in_background();
    // Before the guard exists, so that its orphans come to us if it is
    // killed (see `guard_killed`).
    let _subreaper = tree::Subreaper::new();
    // First, while this process has one thread: see hold/guard/mod.rs.
    let guard = Guard::fork(&Launch {
        program: &spec.program,
        args: &spec.args,
        tty: term.as_ref().map(tty::Terminal::fd),
        foreground: interactive,
    })?;
    // Blocked from here on, in every thread started later too; read by a
    // thread only while a wait for the lock blocks (see `acquire`), then by
    // the supervisor's poll loop.
    let signals = crate::signals::Blocked::new(&FORWARDED)?;
    // `req.reenter` is the first key's (RLOCK_HELD / RLOCK_TOKEN, as the
    // caller found it); each other lock of a set re-enters with the token
    // an enclosing exec holds it with (RLOCK_HELD), else takes a fresh
    // grant: `rlock exec a b -- rlock exec b a -- ...` re-enters both.
    let held_env = spec.held.as_deref();
    let mut told = take::Told::new(&guard, keys.len());
    let mut leases = crate::lock::set::take_all(locker, keys, req, None, &mut |l, k, r, c| {
        let mut r = r.clone();
        if k != key {
            r.reenter = names
                .iter()
                .zip(keys)
                .find(|(_, n)| *n == k)
                .and_then(|(name, _)| reentry_token(held_env, None, name));
        }
        acquire(l, k, &r, &signals, c, &mut *on_wait, &mut |t| {
            told.waiting(k, t)
        })
        .inspect(|lease| told.granted(lease))
    })?;
    let mut lease = leases.remove(0);
    let others = leases;
    // The set is as safe as its earliest lease: the kill deadline, the
    // first renewal and every check below count from it. (Safety: the
    // command may only run while *every* lock is held, so the minimum is
    // the only deadline that can be used.)
    if let Some(earliest) = others.iter().map(|l| l.valid_until).min() {
        lease.valid_until = lease.valid_until.min(earliest);
    }
    let fences = crate::lock::set::fences_env(&[&[lease.clone()][..], &others[..]].concat());
    // The outermost exec gives back every hold of its token, so that a
    // nested exec that crashed before its release cannot keep the lock
    // held; a nested one gives back its own.
    // `--min-hold` keeps the lock taken after a command that succeeded
    // only: after a failure (or a command that never ran) another host
    // may try again at once (cron: a failed run is retried by the next
    // host to fire, not skipped for the whole min-hold).
    let release = |locker: &mut Locker, succeeded: bool| {
        let how = |l: &Lease| Release::of(l.count == 1, succeeded);
        for o in others.iter().rev() {
            let _ = locker.release_with(&o.key, &o.token, &how(o));
        }
        locker.release_with(key, &lease.token, &how(&lease))
    };
    // The release after the command ended: the history's `released` event
    // carries its exit code (`overran` instead after --max-hold).
    let release_noted = |locker: &mut Locker, succeeded: bool, code: Option<i32>, overran: bool| {
        let note = crate::lock::ReleaseNote {
            exit_code: code,
            overran,
        };
        let how = |l: &Lease| Release {
            note,
            ..Release::of(l.count == 1, succeeded)
        };
        // Every lock of the set; the first that was gone (or taken) when
        // the command ended is the one reported, with its name.
        let mut result = (
            key.to_string(),
            locker.release_with(key, &lease.token, &how(&lease)),
        );
        for o in &others {
            let r = locker.release_with(&o.key, &o.token, &how(o));
            let gone = |r: &Result<Released>| {
                matches!(
                    r,
                    Ok(Released::NotHeld) | Err(Error::NotOwner { .. } | Error::Lost { .. })
                )
            };
            if gone(&r) && !gone(&result.1) {
                result = (o.key.clone(), r);
            }
        }
        result
    };
    on_event(Event::Acquired(&lease));
    // --max-hold counts from the grant (its request's send: the lease's
    // own start as the client counts it).
    let overrun_at = spec
        .max_hold
        .map(|d| lease.valid_until - lease.ttl + crate::lock::drift(lease.ttl) + d);
    let deadline =
        (spec.on_lost != OnLost::Ignore).then(|| kill_point(lease.valid_until, lease.ttl));
    // Until the command starts, a signal ends the wait (see the module
    // doc); from the spawn on, the supervisor passes each one on.
    if let Some(sig) = ends_wait(&signals) {
        let _ = release(locker, false);
        return Err(Error::Interrupted(sig));
    }
    if deadline.is_some_and(BootTime::passed) {
        // Waiting for the command's start took the whole lease
        // (a stalled machine): never start it on an expired one.
        let _ = release(locker, false);
        return Err(Error::Lost {
            key: key.into(),
            why: "its lease ran out before the command could start".into(),
        });
    }
    {
        let fence = lease.fence.to_string();
        let mut held = held_for_command(
            spec.held.as_deref(),
            &lock,
            &lease.token,
            spec.exported.as_deref(),
        );
        for (name, o) in names.iter().skip(1).zip(&others) {
            held = held_with(Some(&held), name, &o.token);
        }
        // The dead-man deadline first: the command never runs without.
        guard.deadline(deadline);
        // Should rlock die, the guard gives back these holds once the tree
        // is gone (see hold/guard/release.rs).
        let all: Vec<&Lease> = std::iter::once(&lease).chain(&others).collect();
        if let Some(settings) = guard::release_settings(&all) {
            guard.release_if_killed(&settings);
        }
        let sent = guard.spawn(&[
            ("RLOCK_KEY", &lease.key),
            ("RLOCK_TOKEN", lease.token.as_str()),
            ("RLOCK_FENCE", &fence),
            ("RLOCK_FENCES", &fences),
            (HELD_ENV, &held),
        ]);
        if let Err(e) = sent {
            let _ = release(locker, false);
            return Err(e);
        }
    }
    // No blocking wait for the guard's "started" here: the supervisor
    // takes that report in its loop, renewing and enforcing meanwhile
    // (see `Report::Started` in supervisor.rs).
    let valid_until = Mutex::new(lease.valid_until);
    let stop = AtomicBool::new(false);
    let mut renewer = locker.detached();
    let timeout = renewer
        .timeout()
        .min((lease.ttl / 3).max(Duration::from_millis(50)));
    renewer.set_timeout(timeout);
    let lost_key = Mutex::new(None);
    let cmd_pid = AtomicI32::new(0);
    let renewal = Shared {
        lease: &lease,
        others: &others,
        lost_key: &lost_key,
        valid_until: &valid_until,
        stop: &stop,
        guard: deadline.map(|_| &guard),
        cmd_pid: &cmd_pid,
    };
    let outcome = std::thread::scope(|s| {
        Supervisor {
            guard: &guard,
            pgid: None,
            lease: &lease,
            spec,
            interactive,
            term: term.as_ref(),
            valid_until: &valid_until,
            stop: &stop,
            signals: &signals,
            overrun_at,
            cmd_pid: &cmd_pid,
            renewer: renew::Renewer::new(s, &mut renewer, renewal),
        }
        .run(on_event)
        // The renewer, if it ever started, was told to stop: nothing it
        // sends from now on can extend what we give back below.
    });
    if let Some(t) = &term {
        if let Some(pgid) = outcome.pgid {
            t.take_back(pgid);
        }
        if interactive {
            t.take_back_from_the_dead();
        }
    }
    if let Some(source) = outcome.spawn_failed {
        let code = match source.kind() {
            std::io::ErrorKind::NotFound => exit_code::NOT_FOUND,
            _ => exit_code::CANNOT_EXECUTE,
        };
        // The history's `released` says why the hold was so short: the
        // exit code rlock gives (127, 126), as a shell would.
        let _ = release_noted(locker, false, Some(i32::from(code)), false);
        return Err(Error::Spawn {
            program: spec.program.to_string_lossy().into_owned(),
            code,
            source,
        });
    }
    // A guard killed after it was asked to spawn, started or not: the
    // command may have started (and PR_SET_PDEATHSIG killed it, but a
    // process that left its group could run on).
    if outcome.guard_killed {
        return Err(guard_killed(guard, key, || release(locker, false)));
    }
    // The last validity deadline a grant or renewal confirmed (the renewer
    // is stopped: it moves no more).
    let valid_until = *valid_until.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = outcome.lost {
        // The exit code is 79 whatever the release says, and the release
        // can free at most what is left of the lease: send it once, wait
        // no longer than that (nor the timeout), and send nothing once the
        // lease is over (it ends on the server by itself): with Redis
        // frozen or gone, no resends (5 s beyond the timeout) keep rlock
        // running after the command.
        let left = valid_until.remaining();
        // The renewal that found the loss was answered (gone, or taken):
        // the history's `lost` event, sent once.
        // In a set, the renewer says which lock it found gone and why.
        let (lost, why) = lost_key
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or((key.to_string(), why));
        let all = std::iter::once(&lease).chain(&others);
        if why == crate::lock::LOST_GONE || why == crate::lock::LOST_TAKEN {
            let token = &all.clone().find(|l| l.key == lost).unwrap_or(&lease).token;
            let loss = Loss {
                info: req.info.clone(),
                reason: why.clone(),
            };
            let _ = locker.record_lost(&lost, token, &loss);
        }
        if !left.is_zero() {
            for l in all {
                let how = Release {
                    within: Some(left),
                    ..Release::of(l.count == 1, false)
                };
                let _ = locker.release_with(&l.key, &l.token, &how);
            }
        }
        return Err(Error::Lost { key: lost, why });
    }
    // An overrun is no success: no --min-hold after it.
    let succeeded = !outcome.overran && outcome.status.is_some_and(|st| st.success());
    let code = outcome
        .status
        .map(|st| i32::from(crate::exit_code::for_status(Some(st))));
    // After --max-hold the history says `overran`, not `released`.
    let (gone_key, released) = release_noted(locker, succeeded, code, outcome.overran);
    let answered = BootTime::now();
    // A break that landed while the command ended (the release found its
    // notice, lua/release.lua) is reported as a break, whenever it came:
    // the operator ended the hold.
    if let Err(Error::Lost { why, .. }) = &released
        && why.starts_with(crate::lock::breaking::BROKEN_BY)
    {
        return Err(Error::Lost {
            key: gone_key,
            why: why.clone(),
        });
    }
    let gone = match &released {
        Ok(Released::NotHeld) => Some("it was gone when the command ended"),
        Err(Error::NotOwner { .. }) => Some("another owner held it when the command ended"),
        _ => None,
    };
    // Gone although no renewal noticed: a loss, unless only the release
    // came late (answered after `valid_until`) and the whole tree had ended
    // (`ended`) before `valid_until`. This only picks an exit code once all
    // is over, so it makes no second holder (docs/internals.md, "A release
    // that finds the lock gone").
    let late = gone.is_some()
        && answered >= valid_until
        && outcome.ended.is_some_and(|ended| ended < valid_until);
    let lost = gone.filter(|_| !late).map(String::from);
    if late && let Some(ended) = outcome.ended {
        on_event(Event::ReleasedLate(valid_until - ended));
    }
    if let Some(why) = lost {
        return Err(Error::Lost { key: gone_key, why });
    }
    if let Err(e) = &released
        && !late
    {
        on_event(Event::ReleaseFailed(e));
    }
    use std::os::unix::process::ExitStatusExt;
    if outcome.overran {
        return Ok(Finished {
            code: exit_code::OVERRAN,
            signal: None,
            interactive,
            overran: true,
        });
    }
    Ok(Finished {
        code: exit_code::for_status(outcome.status),
        signal: outcome.status.and_then(|st| st.signal()),
        interactive,
        overran: false,
    })
}
