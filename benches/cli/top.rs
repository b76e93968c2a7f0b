//! Section 14 (`RLOCK_BENCH_SECTIONS=14`): what `rlock top` costs the
//! server with 1,000 locks in use, refreshing every second. The real
//! binary runs live under script(1) (a pseudo-terminal), on a redis-server
//! of its own where 1,000 locks are held (10 of them with a waiter, whose
//! heartbeats are part of the baseline). Two windows of 20 s, one without
//! top and one with it: redis-server's CPU (utime + stime from
//! /proc/<pid>/stat) in % of one core, and the commands' own server time
//! (INFO commandstats usec). Also the time one refresh takes
//! (`Locker::overview`, the library call top makes), median of 5.

use std::collections::HashMap;
use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rlock::{Request, Wait};

use crate::client::{clean_env, locker};
use crate::server::info;
use crate::stats::{median, section};
use crate::support::{Redis, start_redis};
use crate::{Bench, PREFIX, RLOCK};

const LOCKS: usize = 1000;
const WAITED: usize = 10;
const WINDOW: Duration = Duration::from_secs(20);
const TTL: Duration = Duration::from_secs(300);

pub(crate) fn run(_: &Bench) {
    section(&format!(
        "14. rlock top -d 1 with {LOCKS} locks in use ({WAITED} with a waiter): redis-server \
         cost over {:.0} s, without and with top",
        WINDOW.as_secs_f64()
    ));
    let r = start_redis(&[]);
    let mut l = locker(&r);
    let req = Request::builder(TTL)
        .wait(Wait::No)
        .build()
        .expect("request");
    for i in 0..LOCKS {
        l.acquire(&format!("lock-{i:04}"), &req, None, &mut |_| {})
            .expect("acquire");
    }
    let waiters: Vec<Child> = (0..WAITED)
        .map(|i| {
            let mut c = Command::new(RLOCK);
            clean_env(&mut c);
            c.env("RLOCK_URL", r.url())
                .args(["acquire", &format!("lock-{i:04}"), "--ttl", "300s"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            c.spawn().expect("spawn a waiter")
        })
        .collect();
    thread::sleep(Duration::from_secs(2));

    let mut refresh = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let views = l.overview("*").expect("overview");
        refresh.push(t.elapsed());
        assert_eq!(views.len(), LOCKS);
    }

    let (cpu0, usec0) = window(&r, None);
    let top = start_top(&r);
    thread::sleep(Duration::from_secs(2));
    let (cpu1, usec1) = window(&r, Some(&top.1));
    stop_top(top);
    for mut w in waiters {
        let _ = w.kill();
        let _ = w.wait();
    }

    println!(
        "   one refresh (Locker::overview, {LOCKS} locks): median {:.1} ms",
        ms(median(&refresh))
    );
    println!("   window          redis CPU   commands' server time");
    println!("   without top     {:>8.2}%   {:>8.2}%", cpu0, usec0);
    println!("   with top -d 1   {:>8.2}%   {:>8.2}%", cpu1, usec1);
    println!(
        "   top's share     {:>8.2}%   {:>8.2}%   (goal: under 5% of one core)",
        cpu1 - cpu0,
        usec1 - usec0
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Over one window: redis-server's CPU and the commands' server time (INFO
/// commandstats, our INFO left out), both in % of one core. With `top`,
/// checks it still runs at the end.
fn window(r: &Redis, top: Option<&Child>) -> (f64, f64) {
    let mut conn = r.conn();
    let pid = r.child.id();
    let usec = |i: &HashMap<String, f64>| {
        i.iter()
            .filter(|(k, _)| k.starts_with("usec_") && *k != "usec_info")
            .map(|(_, v)| v)
            .sum::<f64>()
    };
    let b = info(&mut conn, &["commandstats"]);
    let c = cpu_seconds(pid);
    let t = Instant::now();
    thread::sleep(WINDOW);
    let c = cpu_seconds(pid) - c;
    let a = info(&mut conn, &["commandstats"]);
    let secs = t.elapsed().as_secs_f64();
    if let Some(top) = top {
        assert!(
            std::fs::metadata(format!("/proc/{}", top.id())).is_ok(),
            "top ended early"
        );
    }
    (c / secs * 100.0, (usec(&a) - usec(&b)) / 1e6 / secs * 100.0)
}

/// `rlock top -d 1` live under script(1) (a pty), its stdin a pipe we
/// keep open to type q at the end.
fn start_top(r: &Redis) -> (std::process::ChildStdin, Child) {
    let mut c = Command::new("script");
    clean_env(&mut c);
    let line = format!(
        "RLOCK_URL={} RLOCK_PREFIX={PREFIX} {RLOCK} top -d 1",
        r.url()
    );
    let mut child = c
        .args(["-qec", &line, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn script(1)");
    (child.stdin.take().expect("stdin"), child)
}

fn stop_top((mut stdin, mut child): (std::process::ChildStdin, Child)) {
    let _ = stdin.write_all(b"q");
    let _ = stdin.flush();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// utime + stime of a process, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after "(comm) ": state is field 3, utime 14 and stime 15.
    let rest: Vec<&str> = stat
        .rsplit_once(") ")
        .map_or(vec![], |(_, r)| r.split(' ').collect());
    let ticks = |i: usize| {
        rest.get(i - 3)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // SAFETY: sysconf has no memory-safety preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(14) + ticks(15)) / hz
}
