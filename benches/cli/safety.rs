//! Section 9: how long before the lease ends on the server the command's
//! last process is gone, when rlock cannot renew: Redis frozen (SIGSTOP),
//! rlock itself stopped (SIGSTOP), and the network lost (a proxy that
//! starts dropping every byte). The command ignores SIGTERM, so what is
//! measured is the hard SIGKILL that the guard and rlock guarantee, not a
//! polite exit.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::PREFIX;
use crate::client::rlock;
use crate::process::{path, wait_deadline, wait_until};
use crate::stats::section;
use crate::support::{signal, start_redis};

const RUNS: usize = 5;
const TTL_MS: u64 = 1500;

#[derive(Clone, Copy)]
enum Stall {
    FrozenRedis,
    StoppedRlock,
    LostNetwork,
}

pub(crate) fn run(_: &crate::Bench) {
    section(&format!(
        "9. exec safety margin: the command's last process gone this long before the lease \
         ends on the server (TTL {TTL_MS} ms, command ignores SIGTERM, {RUNS} runs)"
    ));
    println!(
        "   {:<16} {:>8} {:>8} {:>8}",
        "stall", "min ms", "median", "max ms"
    );
    for (name, stall) in [
        ("Redis frozen", Stall::FrozenRedis),
        ("rlock stopped", Stall::StoppedRlock),
        ("network lost", Stall::LostNetwork),
    ] {
        let mut got: Vec<i64> = (0..RUNS).filter_map(|_| one_run(stall)).collect();
        got.sort();
        if got.is_empty() {
            println!("   {name:<16} failed");
            continue;
        }
        println!(
            "   {name:<16} {:>8} {:>8} {:>8}",
            got[0],
            got[got.len() / 2],
            got[got.len() - 1]
        );
    }
    println!("   negative would mean the command outlived the lease; each run's lease end is read");
    println!(
        "   from the server just before the stall (server and bench share the machine's clock)"
    );
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis()
        .try_into()
        .expect("milliseconds since 1970 fit an i64")
}

/// Alive and not a zombie.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Lease end (server ms) minus the moment the command was seen dead.
fn one_run(stall: Stall) -> Option<i64> {
    let r = start_redis(&[]);
    let proxy = Proxy::start(r.port);
    let dir = rlock_test_support::scratch_dir("bench-safety");
    let pidfile = dir.join("pid");
    let script = format!(
        "trap '' TERM; echo $$ > {}; while :; do sleep 0.01; done",
        path(&pidfile)
    );
    let mut holder = rlock(&r)
        .env("RLOCK_URL", format!("redis://127.0.0.1:{}", proxy.port))
        .args([
            "--connect-timeout",
            "500ms",
            "exec",
            "--ttl",
            &format!("{TTL_MS}ms"),
            "m",
        ])
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string(&pidfile).is_ok_and(|s| s.trim().parse::<i32>().is_ok())
    });
    let cmd: i32 = std::fs::read_to_string(&pidfile)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    // Just after the first renewal (at TTL/3), so none lands meanwhile.
    thread::sleep(Duration::from_millis(TTL_MS / 3 + 100));
    let mut conn = r.conn();
    let (_, ends): (String, f64) = redis::cmd("ZRANGE")
        .arg(format!("{PREFIX}{{m}}:h"))
        .arg(0)
        .arg(0)
        .arg("WITHSCORES")
        .query::<Vec<(String, f64)>>(&mut conn)
        .ok()?
        .pop()?;
    match stall {
        Stall::FrozenRedis => signal(r.child.id() as i32, libc::SIGSTOP),
        Stall::StoppedRlock => signal(holder.id() as i32, libc::SIGSTOP),
        Stall::LostNetwork => proxy.drop_everything(),
    }
    wait_until(Duration::from_secs(10), || !alive(cmd));
    let dead = now_ms();
    signal(r.child.id() as i32, libc::SIGCONT);
    signal(holder.id() as i32, libc::SIGCONT);
    proxy.heal();
    wait_deadline(&mut holder, Instant::now() + Duration::from_secs(10));
    let _ = holder.kill();
    let _ = holder.wait();
    // A ZSET score holding milliseconds since 1970: whole, far below 2^53.
    #[allow(clippy::cast_possible_truncation, reason = "see above")]
    Some(ends as i64 - dead)
}

/// A TCP proxy to a Redis port that can start dropping every byte in both
/// directions while keeping the connections open: a partition, not a
/// refusal.
struct Proxy {
    port: u16,
    dropping: Arc<AtomicBool>,
}

impl Proxy {
    fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let dropping = Arc::new(AtomicBool::new(false));
        let d = dropping.clone();
        thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                for (from, to) in [
                    (client.try_clone(), server.try_clone()),
                    (server.try_clone(), client.try_clone()),
                ] {
                    let (Ok(mut from), Ok(mut to)) = (from, to) else {
                        continue;
                    };
                    let d = d.clone();
                    thread::spawn(move || {
                        let mut buf = [0u8; 16384];
                        while let Ok(n) = from.read(&mut buf) {
                            if n == 0 {
                                break;
                            }
                            if !d.load(Ordering::SeqCst) && to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Proxy { port, dropping }
    }

    fn drop_everything(&self) {
        self.dropping.store(true, Ordering::SeqCst);
    }

    fn heal(&self) {
        self.dropping.store(false, Ordering::SeqCst);
    }
}
