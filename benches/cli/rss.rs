//! Section 7: peak RSS of one run, measured by a fresh copy of this
//! bench binary acting as a helper.

use std::process::{Command, Stdio};

use crate::client::*;
use crate::process::*;
use crate::stats::*;
use crate::{Bench, RLOCK};

/// Set in the environment of this bench binary run as the peak-RSS helper.
pub(crate) const RSS_HELPER: &str = "RLOCK_BENCH_RSS_HELPER";

/// Peak resident set size of one run, in KB. Linux keeps a process's peak
/// across execve, and a child spawned by this bench starts out sharing the
/// bench's memory (vfork), so ru_maxrss of any child of ours is at least
/// the bench's own peak: every command would read about the same 9 MB. So
/// a fresh copy of this binary, still small, forks and runs each command
/// (see [`rss_helper_main`]) and reports what wait4(2) measured.
pub(crate) fn run(b: &Bench) {
    let (r, etcd) = (&b.redis, b.etcd());
    const N: usize = 10;
    let lockfile = path(&r.dir.join("flock-rss.lock"));
    let url = r.url();
    let mut cases: Vec<(&str, Vec<String>)> = vec![
        (
            "rlock exec k -- true",
            vec![RLOCK, "exec", "k", "--", "true"],
        ),
        ("flock FILE true", vec!["flock", &lockfile, "true"]),
        ("/bin/true", vec!["/bin/true"]),
    ]
    .into_iter()
    .map(|(name, argv)| (name, argv.into_iter().map(String::from).collect()))
    .collect();
    if let Ok(e) = etcd {
        let mut argv = vec!["etcdctl".into(), e.endpoints_arg()];
        argv.extend(["lock", "k", "true"].map(String::from));
        cases.push(("etcdctl lock k true", argv));
    }
    let kb: Vec<Vec<u64>> = cases
        .iter()
        .map(|(_, argv)| {
            (0..N)
                .map(|_| {
                    let exe = std::env::current_exe().expect("path of this bench binary");
                    let mut c = Command::new(exe);
                    clean_env(&mut c);
                    c.env(RSS_HELPER, "1").env("RLOCK_URL", &url).args(argv);
                    let out = run_ok(c.stdin(Stdio::null()));
                    let text = String::from_utf8_lossy(&out.stdout);
                    text.trim().parse().expect("helper prints a number")
                })
                .collect()
        })
        .collect();

    section(&format!(
        "7. Peak RSS of one run in KB (ru_maxrss, incl. children it waited for; N={N})"
    ));
    println!("   {:<40} {:>9} {:>9}", "command", "median", "max");
    let med = |v: &[u64]| sorted_u64(v)[v.len() / 2];
    for ((name, _), v) in cases.iter().zip(&kb) {
        let max = v.iter().max().copied().unwrap_or(0);
        println!("   {:<40} {:>9} {:>9}", name, med(v), max);
    }
    let ratio = |i: usize, j: usize| med(&kb[i]) as f64 / med(&kb[j]) as f64;
    match etcd {
        Ok(_) => println!(
            "   ratios: exec/flock {:.2}x   etcdctl/exec {:.2}x",
            ratio(0, 1),
            ratio(3, 0)
        ),
        Err(why) => {
            println!("   ratios: exec/flock {:.2}x", ratio(0, 1));
            println!("   etcd: {why}, skipped");
        }
    }
    println!("   measured by a fresh copy of this bench: fork, exec, wait4, as /usr/bin/time %M");
    println!("   rlock's guard and the command are rlock's waited-for descendants: included");
}

/// The helper side of [`peak_rss`]: run argv once, print its ru_maxrss in
/// KB, and exit 0 if it succeeded. A real fork(2), not std's vfork-style
/// spawn: the child then starts with a new memory map holding only the
/// helper's few private pages, instead of sharing (and inheriting the peak
/// of) the helper's whole map until it execs. The helper is single-threaded.
pub(crate) fn rss_helper_main() -> ! {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let args: Vec<CString> = std::env::args_os()
        .skip(1)
        .map(|a| CString::new(a.as_bytes()).expect("no NUL in arguments"))
        .collect();
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    // SAFETY: single-threaded, nothing else reads the environment now.
    unsafe { std::env::remove_var(RSS_HELPER) };
    // SAFETY: a NUL-terminated literal.
    let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
    assert!(null >= 0, "open /dev/null");
    // SAFETY: the helper is single-threaded, so the child may call
    // anything; it only uses memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: see above; argv is NULL-terminated, its strings live.
        unsafe {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            libc::execvp(argv[0], argv.as_ptr());
            libc::_exit(127);
        }
    }
    assert!(pid > 0, "fork: {}", std::io::Error::last_os_error());
    let mut status = 0;
    // SAFETY: rusage is plain old data; all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pointers to live locals of the right types.
    while unsafe { libc::wait4(pid, &mut status, 0, &mut usage) } != pid {
        let err = std::io::Error::last_os_error();
        assert_eq!(err.kind(), std::io::ErrorKind::Interrupted, "wait4: {err}");
    }
    println!("{}", usage.ru_maxrss); // KB on Linux
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    std::process::exit(if ok { 0 } else { 1 });
}
