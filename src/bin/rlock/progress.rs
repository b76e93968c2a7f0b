//! What `rlock` shows on stderr while it waits for a busy lock (the
//! library reports each busy observation through `on_wait`; this only
//! renders them).
//!
//! - stderr a terminal, rlock in its foreground, not -q: one live status line, redrawn in place
//!   every second ([`LiveLine`]) with who holds the lock (host, pid, since),
//!   our place in the queue, the time waited and the holder's lease time
//!   left; erased when the wait ends, however it ends.
//! - otherwise, not -q: one line when the wait begins, as always; with -v
//!   one more each time another holder is seen.
//!
//! Nothing is set up before the first busy observation: an uncontended
//! acquire touches no terminal and starts no thread.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rlock::Busy;
use rlock::duration::human;

/// The wait's display, for one acquire (of a lock, or of a set: each
/// observation names the lock that is busy, [`Busy::key`]).
pub(crate) struct Progress {
    quiet: bool,
    verbose: bool,
    shown: RefCell<Shown>,
}

enum Shown {
    /// Not waited yet.
    Nothing,
    /// The live line.
    Line(LiveLine),
    /// Plain lines; the holder named last.
    Plain(Busy),
    /// The wait is over.
    Done,
}

impl Progress {
    pub(crate) fn new(quiet: bool, verbose: bool) -> Progress {
        Progress {
            quiet,
            verbose,
            shown: RefCell::new(Shown::Nothing),
        }
    }

    /// A busy observation (the library's `on_wait`).
    pub(crate) fn update(&self, busy: &Busy) {
        if self.quiet {
            return;
        }
        let mut shown = self.shown.borrow_mut();
        let key = &busy.key;
        // A new wait: the first, or the next lock of a set.
        let new_wait = match &*shown {
            Shown::Nothing => true,
            Shown::Line(line) => line.seen().busy.key != *key,
            Shown::Plain(last) => last.key != *key,
            Shown::Done => false,
        };
        if new_wait && let Some(hint) = self_wait_hint(busy) {
            if let Shown::Line(line) = &*shown {
                line.suspend(|| say(format_args!("{hint}")));
            } else {
                say(format_args!("{hint}"));
            }
        }
        match &mut *shown {
            Shown::Nothing if std::io::stderr().is_terminal() && in_the_foreground() => {
                *shown = Shown::Line(LiveLine::start(busy));
            }
            Shown::Nothing => {
                say(format_args!(
                    "rlock: waiting for lock {key:?} held by {busy}"
                ));
                *shown = Shown::Plain(busy.clone());
            }
            Shown::Line(line) => line.update(busy),
            Shown::Plain(last) => {
                if new_wait {
                    say(format_args!(
                        "rlock: waiting for lock {key:?} held by {busy}"
                    ));
                } else if self.verbose && busy.holder.is_some() && !same_holder(last, busy) {
                    say(format_args!("rlock: lock {key:?} is now held by {busy}"));
                }
                *last = busy.clone();
            }
            Shown::Done => {}
        }
    }

    /// The wait is over: erase the live line (before anything else is
    /// written: a message, the command's output).
    pub(crate) fn finish(&self) {
        if let Shown::Line(line) = self.shown.replace(Shown::Done) {
            line.finish();
        }
    }
}

/// The live line on stderr (a terminal): drawn at once, redrawn in place
/// from the latest observation, aged locally (no extra calls to Redis),
/// every second by a thread of its own and at each new observation;
/// erased by [`LiveLine::finish`]. Every write to stderr is made holding
/// the lock on [`Seen`], so a redraw never lands between an erase and
/// what is written after it.
///
/// A few lines rather than a progress-bar crate: indicatif's rate
/// estimator, which this line never shows, calls `pow`, and made every
/// rlock start load libm (measured in BENCHMARKS.md).
struct LiveLine {
    seen: Arc<(Mutex<Seen>, Condvar)>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

/// The latest observation and when it came; the spinner's frame.
struct Seen {
    busy: Busy,
    at: Instant,
    frame: usize,
    done: bool,
}

/// Back to the line's start, and clear it.
const ERASE: &str = "\r\x1b[2K";
const SPINNER: [char; 8] = ['⠁', '⠂', '⠄', '⡀', '⢀', '⠠', '⠐', '⠈'];

impl Seen {
    fn draw(&mut self) {
        let line = status(&self.busy, self.at.elapsed());
        // One row, never wrapped: a wrapped line cannot be redrawn in
        // place (the spinner and a space go first).
        let width = usize::from(console::Term::stderr().size().1);
        let line = console::truncate_str(&line, width.saturating_sub(3), "…");
        let spin = SPINNER[self.frame % SPINNER.len()];
        self.frame += 1;
        let _ = std::io::stderr().write_all(format!("{ERASE}{spin} {line}").as_bytes());
    }
}

impl LiveLine {
    fn start(busy: &Busy) -> LiveLine {
        let seen = Arc::new((
            Mutex::new(Seen {
                busy: busy.clone(),
                at: Instant::now(),
                frame: 0,
                done: false,
            }),
            Condvar::new(),
        ));
        seen.0.lock().unwrap_or_else(|e| e.into_inner()).draw();
        let shared = seen.clone();
        // The thread inherits this thread's signal mask, so the signals
        // `rlock exec` takes through a signalfd stay blocked in it. Without
        // it (none could start) the line is redrawn at each observation
        // only.
        let ticker = std::thread::Builder::new()
            .name("rlock-line".into())
            .spawn(move || {
                let (lock, woken) = &*shared;
                let mut seen = lock.lock().unwrap_or_else(|e| e.into_inner());
                let mut next = Instant::now() + Duration::from_secs(1);
                loop {
                    let wait = next.saturating_duration_since(Instant::now());
                    seen = woken
                        .wait_timeout(seen, wait)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    if seen.done {
                        return;
                    }
                    if Instant::now() >= next {
                        seen.draw();
                        next = Instant::now() + Duration::from_secs(1);
                    }
                }
            })
            .ok();
        LiveLine { seen, ticker }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new observation: shown at once.
    fn update(&self, busy: &Busy) {
        let mut seen = self.seen();
        seen.busy = busy.clone();
        seen.at = Instant::now();
        seen.draw();
    }

    /// Erase the line, run `f` (which writes to stderr), draw it again.
    fn suspend(&self, f: impl FnOnce()) {
        let mut seen = self.seen();
        let _ = std::io::stderr().write_all(ERASE.as_bytes());
        f();
        seen.draw();
    }

    /// Erase the line for good; the thread ends before this returns.
    fn finish(mut self) {
        {
            let mut seen = self.seen();
            seen.done = true;
            let _ = std::io::stderr().write_all(ERASE.as_bytes());
        }
        self.seen.1.notify_all();
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The live line: `busy` as observed `age` ago. What changes comes first,
/// so that a narrow terminal cuts only the holder's start time.
fn status(busy: &Busy, age: Duration) -> String {
    let mut s = format!(
        "rlock: waiting {} for {:?}, ",
        secs(busy.waited + age),
        busy.key
    );
    match busy.position {
        0 => s.push_str("next in line"),
        n => {
            let _ = write!(s, "{n} ahead in line");
        }
    }
    let Some(h) = &busy.holder else {
        s.push_str("; waiters queued ahead");
        return s;
    };
    let left = busy.holder_ttl.saturating_sub(age);
    let _ = write!(s, "; held by host {} pid {}", h.host, h.pid);
    if busy.holders > 1 {
        let _ = write!(s, " and {} more", busy.holders - 1);
    }
    let _ = write!(s, ", lease {} left", secs(left));
    if busy.since_ms > 0 {
        let _ = write!(s, ", since {}", rlock::lock::format_ms(busy.since_ms));
    }
    s
}

/// Whole seconds: "0s", "42s", "1h 2m 3s".
fn secs(d: Duration) -> String {
    match d.as_secs() {
        0 => "0s".into(),
        n => human(Duration::from_secs(n)),
    }
}

/// The same holder? (RedLock's masters each keep their own "since", a few
/// ms apart.)
fn same_holder(a: &Busy, b: &Busy) -> bool {
    match (&a.holder, &b.holder) {
        (Some(x), Some(y)) => {
            x.host == y.host && x.pid == y.pid && a.since_ms.abs_diff(b.since_ms) <= 1000
        }
        (None, None) => true,
        _ => false,
    }
}

/// How the holder of a busy lock is this very script, seen from this rlock.
#[derive(Debug, PartialEq, Eq)]
enum SelfWait {
    /// The holder's pid is one of our ancestors': a script that took the
    /// lock with `tok=$(rlock acquire K)` (the holder's pid is the
    /// script's, see `prepare` in cmd/acquire.rs) runs `rlock exec K`.
    Ancestor,
    /// The holder's pid is our own: the same script ran rlock as its last
    /// command, which a shell does in its own place (exec), so this rlock
    /// has the script's pid. Never a hold of this rlock itself: rlock
    /// never waits for a lock it holds (a set names each lock once, and
    /// a re-entry with RLOCK_TOKEN is granted at once).
    ThisPid,
}

/// Is the holder this script? (`here`: our host; `me`: our pid;
/// `ancestor`: whether a pid is one of our ancestors'.)
fn self_wait(
    holder: &rlock::HolderInfo,
    here: &str,
    me: u32,
    ancestor: impl Fn(u32) -> bool,
) -> Option<SelfWait> {
    if holder.host != here {
        None
    } else if holder.pid == me {
        Some(SelfWait::ThisPid)
    } else if ancestor(holder.pid) {
        Some(SelfWait::Ancestor)
    } else {
        None
    }
}

/// The line that says we wait for ourselves, when the holder is this
/// script (see [`SelfWait`]). Only a hint: the wait goes on as asked.
fn self_wait_hint(busy: &Busy) -> Option<String> {
    let h = busy.holder.as_ref()?;
    let who = self_wait(
        h,
        &rlock::HolderInfo::current(None).host,
        std::process::id(),
        rlock::exec::is_ancestor,
    )?;
    Some(hint_text(busy, &who))
}

fn hint_text(busy: &Busy, who: &SelfWait) -> String {
    let pid = busy.holder.as_ref().map_or(0, |h| h.pid);
    let key = &busy.key;
    let mut at = String::new();
    if busy.since_ms > 0 {
        let _ = write!(
            at,
            "acquired at {}, ",
            rlock::lock::format_ms(busy.since_ms)
        );
    }
    let by = match who {
        SelfWait::Ancestor => format!("by pid {pid}, which started this rlock"),
        SelfWait::ThisPid => {
            format!("by pid {pid}, which ran this rlock in its own place: the same process")
        }
    };
    format!(
        "rlock: this script already holds lock {key:?} ({at}{by}): it waits for itself; \
         to re-enter, export the token it holds the lock with (export RLOCK_TOKEN=\"$tok\" \
         after tok=$(rlock acquire ...), or export RLOCK_TOKEN=$(rlock acquire {key:?} --keep))"
    )
}

/// Is rlock's process group the foreground group of the terminal stderr
/// is? A background job (`rlock exec ... &` at a prompt) redrawing a line
/// every second would write it over whatever the user types meanwhile: it
/// gets the plain line instead.
fn in_the_foreground() -> bool {
    // SAFETY: plain syscalls.
    unsafe { libc::tcgetpgrp(libc::STDERR_FILENO) == libc::getpgrp() }
}

fn say(args: std::fmt::Arguments) {
    let _ = writeln!(std::io::stderr(), "{args}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlock::HolderInfo;

    fn busy(key: &str, host: &str, pid: u32) -> Busy {
        Busy {
            key: key.into(),
            holder: Some(HolderInfo {
                host: host.into(),
                pid,
                ..HolderInfo::default()
            }),
            since_ms: 1_700_000_000_000,
            expires_in: Duration::from_secs(1),
            position: 0,
            holders: 1,
            holder_ttl: Duration::from_secs(20),
            waited: Duration::from_secs(3),
        }
    }

    #[test]
    fn the_holder_is_this_script_by_our_own_pid_or_an_ancestors() {
        let ancestor = |pid| pid == 7;
        let h = |host: &str, pid| busy("k", host, pid).holder.unwrap();
        assert_eq!(
            self_wait(&h("me", 42), "me", 42, ancestor),
            Some(SelfWait::ThisPid)
        );
        assert_eq!(
            self_wait(&h("me", 7), "me", 42, ancestor),
            Some(SelfWait::Ancestor)
        );
        assert_eq!(self_wait(&h("me", 8), "me", 42, ancestor), None);
        // Another host's pids are not ours.
        assert_eq!(self_wait(&h("other", 42), "me", 42, ancestor), None);
        assert_eq!(self_wait(&h("other", 7), "me", 42, ancestor), None);
    }

    #[test]
    fn the_hint_names_the_lock_and_when_it_was_acquired() {
        let b = busy("zb", "me", 42);
        let text = hint_text(&b, &SelfWait::ThisPid);
        assert!(
            text.starts_with(
                "rlock: this script already holds lock \"zb\" (acquired at \
                 2023-11-14T22:13:20Z, by pid 42, "
            ),
            "{text}"
        );
        assert!(text.contains("export RLOCK_TOKEN"), "{text}");
        let mut unknown = b.clone();
        unknown.since_ms = 0;
        let text = hint_text(&unknown, &SelfWait::Ancestor);
        assert!(
            text.starts_with(
                "rlock: this script already holds lock \"zb\" (by pid 42, which started this rlock)"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_live_line_names_the_busy_lock() {
        let s = status(&busy("zb", "h", 9), Duration::from_secs(2));
        assert!(
            s.starts_with("rlock: waiting 5s for \"zb\", next in line; held by host h pid 9"),
            "{s}"
        );
    }
}
