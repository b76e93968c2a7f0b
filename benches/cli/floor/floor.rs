//! The floor of `rlock exec KEY -- CMD`: what any Redis lock around a
//! command must do, and nothing else. Section 1 of the cli bench compiles
//! it with rustc alone (std only, no crates) and times it beside rlock and
//! flock.
//!
//! `floor plain HOST:PORT KEY CMD [ARG...]`: start, connect, `SET KEY TOKEN
//! NX PX 30000`, run CMD and wait, a compare-and-delete script, exit with
//! CMD's code (128+N if signal N killed it).
//!
//! `floor guard ...`: the same with rlock's minimum dead-man guard, the
//! second process the exec invariant needs (src/exec/mod.rs): forked after
//! the connect and before the SET, as rlock's; the command's parent, which
//! starts it on the go with PR_SET_PDEATHSIG; SIGKILLs it if this process's
//! end of the socket closes before a "finished" byte; reports its exit
//! status; and exits on "finished". What rlock's guard does beyond this
//! (subreaper and tree walks, kill deadline timer, releaser, reports of
//! start and stops) costs nothing in a run where nothing goes wrong, or is
//! left out as a per-run cost of rlock's own.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, exit};

// The C library std links anyway; no libc crate.
#[repr(C)]
struct PollFd {
    fd: i32,
    events: i16,
    revents: i16,
}
unsafe extern "C" {
    fn fork() -> i32;
    fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
    fn prctl(option: i32, arg: u64, ...) -> i32;
    fn poll(fds: *mut PollFd, n: u64, timeout: i32) -> i32;
    fn syscall(n: i64, ...) -> i64;
    fn _exit(code: i32) -> !;
}
const PR_SET_PDEATHSIG: i32 = 1;
const SIGKILL: i32 = 9;
const SYS_PIDFD_OPEN: i64 = 434;
const POLLIN: i16 = 1;

/// One RESP request, written by hand; its reply's first line.
fn call(redis: &TcpStream, reader: &mut impl BufRead, parts: &[&str]) -> String {
    let mut req = format!("*{}\r\n", parts.len());
    for p in parts {
        req += &format!("${}\r\n{p}\r\n", p.len());
    }
    (&*redis).write_all(req.as_bytes()).expect("send");
    let mut line = String::new();
    reader.read_line(&mut line).expect("reply");
    line
}

fn code(st: ExitStatus) -> i32 {
    st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
}

/// The command, as the command's parent starts it: SIGKILLed should that
/// parent die (rlock's guard sets the same, and more, before exec).
fn command(argv: &[String]) -> Command {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    // SAFETY: prctl is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            (prctl(PR_SET_PDEATHSIG, SIGKILL as u64) == 0)
                .then_some(())
                .ok_or_else(std::io::Error::last_os_error)
        })
    };
    cmd
}

/// The guard (a forked copy of this process): wait for the go, start the
/// command, report its status, stay until "finished"; SIGKILL it if the
/// parent's end closes first (the parent died).
fn guard(mut sock: UnixStream, argv: &[String]) -> ! {
    let mut b = [0u8; 1];
    if sock.read(&mut b).unwrap_or(0) != 1 {
        unsafe { _exit(0) } // no go: the parent died or gave up
    }
    let mut child = command(argv)
        .spawn()
        .unwrap_or_else(|_| unsafe { _exit(127) });
    // SAFETY: plain syscall; the command's exit makes it readable.
    let pidfd = unsafe { syscall(SYS_PIDFD_OPEN, child.id() as i64, 0i64) } as i32;
    let mut fds = [
        PollFd {
            fd: sock.as_raw_fd(),
            events: POLLIN,
            revents: 0,
        },
        PollFd {
            fd: pidfd,
            events: POLLIN,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: a valid array of pollfds.
        unsafe { poll(fds.as_mut_ptr(), 2, -1) };
        if fds[1].revents != 0 {
            break;
        }
        if fds[0].revents != 0 {
            // Nothing but the end is sent while the command runs: the
            // parent is gone.
            let _ = child.kill();
            unsafe { _exit(0) }
        }
    }
    let st = child.wait().expect("wait");
    let _ = sock.write_all(&st.into_raw().to_le_bytes());
    // "finished" (or the end, if the parent died after its release or
    // before: rlock's guard would run its releaser then).
    let _ = sock.read(&mut b);
    unsafe { _exit(0) }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (mode, addr, key, argv) = (&args[1], &args[2], &args[3], &args[4..]);
    let redis = TcpStream::connect(addr.as_str()).expect("connect");
    redis.set_nodelay(true).expect("nodelay");
    let mut reader = BufReader::new(&redis);
    let guarded = mode == "guard";
    let mut sock = None;
    if guarded {
        let (ours, theirs) = UnixStream::pair().expect("socketpair");
        // SAFETY: this process has one thread; the child never returns.
        match unsafe { fork() } {
            0 => {
                drop(ours);
                guard(theirs, argv)
            }
            pid if pid > 0 => sock = Some((ours, pid)),
            _ => panic!("fork"),
        }
    }
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    let token = format!(
        "{}-{}",
        std::process::id(),
        since.map_or(0, |d| d.as_nanos())
    );
    let got = call(
        &redis,
        &mut reader,
        &["SET", key, &token, "NX", "PX", "30000"],
    );
    if got != "+OK\r\n" {
        eprintln!("floor: {key} is held ({})", got.trim());
        exit(75);
    }
    let status = match &mut sock {
        // The go, then the guard's report of the command's status.
        Some((s, _)) => {
            s.write_all(b"S").expect("go");
            let mut raw = [0u8; 4];
            s.read_exact(&mut raw).expect("the guard's report");
            ExitStatus::from_raw(i32::from_le_bytes(raw))
        }
        None => command(argv).status().expect("spawn"),
    };
    let del = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";
    let got = call(&redis, &mut reader, &["EVAL", del, "1", key, &token]);
    assert_eq!(got, ":1\r\n", "release");
    if let Some((s, pid)) = sock {
        // "finished", then the guard's exit.
        let _ = (&s).write_all(b"F");
        drop(s);
        // SAFETY: our own child.
        unsafe { waitpid(pid, std::ptr::null_mut(), 0) };
    }
    exit(code(status));
}
