//! `rlock top`: one plain frame (--once, or without a terminal), and the
//! live view in a real terminal (tmux): rows shown, q quits, Ctrl-C and
//! SIGTERM end it, the terminal comes back as it was, a narrow or resized
//! pane cuts rows instead of wrapping. Bad input: 64, nothing written.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::util::*;

/// Hold `key` for a minute, from a process that exits at once.
fn hold(r: &Redis, key: &str) {
    rlock(r).args(["acquire", key, "--ttl", "60s"]).run().ok();
}

/// `n` waiters for `key` (each `exec -w 60s -- true`), queued in turn.
fn waiters(r: &Redis, key: &str, n: u64) -> Vec<Child> {
    (1..=n)
        .map(|i| {
            let c = rlock(r)
                .args(["exec", key, "-w", "60s", "--", "true"])
                .spawn();
            r.await_waiters(key, i);
            c
        })
        .collect()
}

fn stop(children: Vec<Child>) {
    for mut c in children {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// The rows of a frame: the lock names in order, after the titles.
fn names(frame: &str) -> Vec<String> {
    frame
        .lines()
        .skip_while(|l| !l.starts_with("LOCK "))
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn once_ranks_the_most_contended_first_in_plain_text() {
    let r = Redis::shared();
    for k in ["quiet", "busy", "lesser"] {
        hold(&r, k);
    }
    let mut w = waiters(&r, "busy", 2);
    w.extend(waiters(&r, "lesser", 1));
    let out = rlock(&r).args(["top", "--once"]).run().ok().stdout;
    stop(w);
    assert!(
        !out.contains('\x1b'),
        "escape codes in a plain frame: {out:?}"
    );
    assert!(out.starts_with("rlock top - 3 locks in use"), "{out}");
    assert_eq!(names(&out), ["busy", "lesser", "quiet"], "{out}");
    let busy = out.lines().find(|l| l.starts_with("busy ")).unwrap();
    let cells: Vec<&str> = busy.split_whitespace().collect();
    // LOCK HELD TTL WAIT OLDEST KIND HOLDER ...
    assert_eq!((cells[5], cells[3]), ("exclusive", "2"), "{busy}");
    assert!(cells[6].contains(':'), "holder host:pid: {busy}");
    assert_ne!(cells[4], "-", "the oldest wait is shown: {busy}");
    let quiet = out.lines().find(|l| l.starts_with("quiet ")).unwrap();
    let cells: Vec<&str> = quiet.split_whitespace().collect();
    assert_eq!((cells[3], cells[4]), ("0", "-"), "{quiet}");
}

#[test]
fn the_pattern_selects_locks() {
    let r = Redis::shared();
    for k in ["app-a", "app-b", "other"] {
        hold(&r, k);
    }
    let out = rlock(&r).args(["top", "app-*", "--once"]).run().ok().stdout;
    assert_eq!(names(&out), ["app-a", "app-b"], "{out}");
}

#[test]
fn the_oldest_wait_counts_from_the_first_waiter_still_queued() {
    let r = Redis::shared();
    hold(&r, "k");
    let first = waiters(&r, "k", 1);
    std::thread::sleep(Duration::from_millis(1500));
    let second_spawned = Instant::now();
    let second = vec![
        rlock(&r)
            .args(["exec", "k", "-w", "60s", "--", "true"])
            .spawn(),
    ];
    r.await_waiters("k", 2);
    let views = r.locker().overview("k").unwrap();
    let wait = views[0].oldest_wait.expect("an oldest wait");
    assert!(wait >= Duration::from_millis(1500), "{wait:?}");
    // The first waiter leaves (Ctrl-C: it takes itself out of the queue):
    // the second is now the oldest.
    for c in first {
        kill(c.id(), libc::SIGINT);
        finish(c, "the first waiter");
    }
    eventually(Duration::from_secs(10), "the first waiter gone", || {
        r.status_json("k")["waiting"] == 1
    });
    let wait = r.locker().overview("k").unwrap()[0].oldest_wait.unwrap();
    // The second's wait, at most the time since it was spawned; the
    // first's was 1.5 s longer.
    let since = second_spawned.elapsed();
    assert!(
        wait < since + Duration::from_millis(500),
        "{wait:?}, the second spawned {since:?} ago"
    );
    stop(second);
    // The second was killed: once its waiter lease ran out, the next
    // acquire prunes it, and no arrival time is left in the lock's hash.
    let lease = rlock::lock::WAITER_LEASE + Duration::from_secs(5);
    eventually(lease, "no waiter", || r.status_json("k")["waiting"] == 0);
    rlock(&r).args(["acquire", "-n", "k"]).run().code(75);
    let fields: Vec<String> = r.cmd(&["HKEYS", &r.key("k")]);
    assert!(!fields.iter().any(|f| f.starts_with("a:")), "{fields:?}");
}

#[test]
fn without_a_terminal_top_prints_one_plain_frame() {
    let r = Redis::shared();
    hold(&r, "k");
    // stdout is a pipe here: no live view, one frame, exit 0.
    let out = rlock(&r).args(["top"]).run().ok().stdout;
    assert!(!out.contains('\x1b'), "{out:?}");
    assert_eq!(names(&out), ["k"], "{out}");
}

#[test]
fn bad_input_is_refused_with_64_and_nothing_written() {
    let r = Redis::shared();
    for (args, needle) in [
        (&["top", "-d", "0"][..], "out of range"),
        (&["top", "-d", "2h"], "out of range"),
        (&["top", "-d", "soon"], "soon"),
        (&["top", "-d", "-1"], "-1"),
        (&["top", "a\u{1}b"], "control characters"),
        (&["top", "--once", "x\ny"], "control characters"),
        (&["top", "--bogus"], "--bogus"),
    ] {
        rlock(&r).args(args).run().fails(64, needle);
    }
    assert!(r.keys().is_empty(), "{:?}", r.keys());
}

/// A tmux server of its own (its own socket), one window of `cols` x
/// `rows` running an interactive bash (no rc files), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(r: &Redis, name: &str, cols: u16, rows: u16) -> Tmux {
        let socket = format!("rlock-top-{}-{name}", std::process::id());
        let t = Tmux { socket };
        let ok = Command::new("tmux")
            .args(["-L", &t.socket, "-f", "/dev/null", "new-session", "-d"])
            .args(["-x", &cols.to_string(), "-y", &rows.to_string()])
            .args(["env", "PS1=$ ", "bash", "--norc", "--noprofile", "-i"])
            .env("RLOCK_URL", r.url())
            .env("RLOCK_PREFIX", &r.prefix)
            .env("BIN", env!("CARGO_BIN_EXE_rlock"))
            .env_remove("TMUX")
            .status()
            .unwrap()
            .success();
        assert!(ok, "tmux new-session failed");
        t
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Type `keys` (tmux key names, e.g. "q", "C-c", "Enter").
    fn send(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend(keys);
        self.tmux(&args);
    }

    /// Type a command line and Enter.
    fn type_line(&self, line: &str) {
        self.send(&["-l", line]);
        self.send(&["Enter"]);
    }

    /// The screen, one string per line, wrapped lines joined (-J), so a
    /// line that wrapped shows as one line longer than the pane.
    fn screen(&self) -> Vec<String> {
        self.tmux(&["capture-pane", "-p", "-J", "-t", "0"])
            .lines()
            .map(|l| l.trim_end().to_string())
            .collect()
    }

    #[track_caller]
    fn await_screen(&self, what: &str, f: impl Fn(&[String]) -> bool) {
        let mut last = Vec::new();
        let ok = (0..200).any(|_| {
            last = self.screen();
            f(&last) || {
                std::thread::sleep(Duration::from_millis(100));
                false
            }
        });
        assert!(ok, "{what}; the screen:\n{}", last.join("\n"));
    }

    /// The pid of the shell's foreground child (rlock), from /proc.
    fn child_pid(&self) -> i32 {
        let shell = self.tmux(&["display", "-p", "-t", "0", "#{pane_pid}"]);
        let shell = shell.trim();
        let mut pid = None;
        eventually(Duration::from_secs(10), "rlock under the shell", || {
            let kids = read(Path::new(&format!("/proc/{shell}/task/{shell}/children")));
            pid = kids.split_whitespace().next().and_then(|p| p.parse().ok());
            pid.is_some()
        });
        pid.unwrap()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.tmux(&["kill-server"]);
    }
}

/// The terminal settings that matter here: canonical mode, echo, signals.
fn modes(stty: &str) -> Vec<String> {
    stty.split([' ', ';', '\n'])
        .filter(|w| ["icanon", "echo", "isig"].contains(&w.trim_start_matches('-')))
        .map(String::from)
        .collect()
}

/// Run top in the pane, see its rows, end it by `end` (keys or a signal),
/// and check the terminal is as before: settings, main screen, cursor.
fn live_view_ends(name: &str, end: impl FnOnce(&Tmux), code: &str) {
    let r = Redis::shared();
    hold(&r, "alpha");
    let dir = tmp_dir("top", name);
    let (before, after, status) = (dir.join("before"), dir.join("after"), dir.join("status"));
    let t = Tmux::start(&r, name, 80, 24);
    t.type_line(&format!(
        "stty -a > {b}; $BIN top; echo $? > {s}; stty -a > {a}",
        b = before.display(),
        s = status.display(),
        a = after.display()
    ));
    t.await_screen("top shows its rows", |s| {
        s.iter().any(|l| l.starts_with("rlock top - 1 lock in use"))
            && s.iter().any(|l| l.starts_with("alpha "))
    });
    // Keys are not echoed while top runs.
    assert!(modes(&read(&before)).contains(&"icanon".to_string()));
    end(&t);
    eventually(Duration::from_secs(10), "top ended", || {
        !read(&after).is_empty()
    });
    assert_eq!(read(&status).trim(), code);
    assert_eq!(modes(&read(&after)), modes(&read(&before)));
    // Back on the main screen: top's frame is gone, the shell's line is
    // there, and the cursor is shown.
    t.await_screen("the shell's screen back", |s| {
        !s.iter().any(|l| l.starts_with("rlock top")) && s.iter().any(|l| l.contains("$BIN top"))
    });
    assert_eq!(
        t.tmux(&["display", "-p", "-t", "0", "#{cursor_flag} #{alternate_on}"])
            .trim(),
        "1 0"
    );
}

#[test]
fn q_quits_and_restores_the_terminal() {
    live_view_ends("q", |t| t.send(&["q"]), "0");
}

#[test]
fn ctrl_c_ends_the_view_and_restores_the_terminal() {
    live_view_ends("ctrl-c", |t| t.send(&["C-c"]), "130");
}

#[test]
fn sigterm_ends_the_view_and_restores_the_terminal() {
    live_view_ends("term", |t| kill(t.child_pid(), libc::SIGTERM), "143");
}

#[test]
fn a_narrow_or_resized_terminal_cuts_rows_instead_of_wrapping() {
    let r = Redis::shared();
    let long = format!("long-{}", "x".repeat(60));
    hold(&r, &long);
    let t = Tmux::start(&r, "narrow", 40, 24);
    t.type_line("$BIN top -d 0.2");
    let fits = |s: &[String]| s.iter().all(|l| l.chars().count() <= 40);
    t.await_screen("a cut row of the long lock", |s| {
        s.iter().any(|l| l.starts_with("long-xxx")) && fits(s)
    });
    // Wider: the row grows to the new width; narrower again: cut again.
    t.tmux(&["resize-window", "-t", "0", "-x", "120"]);
    t.await_screen("the whole name after widening", |s| {
        s.iter().any(|l| l.starts_with(&format!("{long} ")))
    });
    t.tmux(&["resize-window", "-t", "0", "-x", "30"]);
    t.await_screen("cut to 30 columns", |s| {
        s.iter().any(|l| l.starts_with("long-xxx")) && s.iter().all(|l| l.chars().count() <= 30)
    });
    t.send(&["q"]);
}

#[test]
fn a_short_terminal_shows_how_many_rows_are_left_out() {
    let r = Redis::shared();
    for i in 0..12 {
        hold(&r, &format!("k{i:02}"));
    }
    let t = Tmux::start(&r, "short", 80, 8);
    t.type_line("$BIN top");
    t.await_screen("a cut table", |s| {
        s.iter()
            .any(|l| l.starts_with("... ") && l.ends_with(" more"))
    });
    let s = t.screen();
    assert!(s.len() <= 8, "{s:?}");
    t.send(&["q"]);
}

#[test]
fn data_rlock_did_not_write_is_skipped() {
    let r = Redis::shared();
    for k in ["a", "z"] {
        hold(&r, k);
    }
    // A hash without 'kind', and one with it whose holders key is a string.
    r.cmd::<i64>(&["HSET", &r.key("m1"), "x", "1"]);
    r.cmd::<i64>(&["HSET", &r.key("m2"), "kind", "x"]);
    r.cmd::<()>(&["SET", &format!("{}:h", r.key("m2")), "x"]);
    let out = rlock(&r).args(["top", "--once"]).run().ok().stdout;
    assert_eq!(names(&out), ["a", "z"], "{out}");
    let text = rlock(&r).args(["metrics"]).run().ok().stdout;
    assert!(!text.contains("m1") && !text.contains("m2"), "{text}");
}

#[test]
fn top_and_metrics_see_locks_on_every_cluster_master() {
    let c = Cluster::start(3);
    let rc = || {
        bare_rlock()
            .env("RLOCK_URL", &c.urls())
            .env("RLOCK_CLUSTER", "1")
    };
    let keys: Vec<String> = (0..9).map(|i| format!("l{i}")).collect();
    for k in &keys {
        rc().args(["acquire", k, "--ttl", "60s"]).run().ok();
    }
    let out = rc().args(["top", "--once"]).run().ok().stdout;
    assert_eq!(names(&out), keys, "{out}");
    let text = rc().args(["metrics"]).run().ok().stdout;
    for k in &keys {
        assert!(
            text.contains(&format!("rlock_lock_grants_total{{lock=\"{k}\"}} 1\n")),
            "{text}"
        );
    }
}

#[test]
fn top_and_metrics_work_under_redlock() {
    let ms: Vec<Redis> = (0..3).map(|_| Redis::start()).collect();
    let urls = ms.iter().map(Redis::url).collect::<Vec<_>>().join(",");
    let rl = || bare_rlock().env("RLOCK_URL", &urls);
    rl().args(["acquire", "k", "--ttl", "60s"]).run().ok();
    let out = rl().args(["top", "--once"]).run().ok().stdout;
    assert_eq!(names(&out), ["k"], "{out}");
    let text = rl().args(["metrics"]).run().ok().stdout;
    assert!(
        text.contains("rlock_lock_holders{lock=\"k\"} 1\n"),
        "{text}"
    );
}

mod waiters;
