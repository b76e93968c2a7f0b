//! The guard process itself: its set-up and its loop (see the module doc
//! of [`super`] for what it promises).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use super::handle::Launch;
use super::spawn::{CHLD, IGNORED, Inherited, set_action, spawn};
use super::wire::{MAX_MSG, MAX_RELEASE, Report, ToGuard, Undecoded};
use super::{last_errno, tree};

/// `rlock`: rlock's pid, the guard's parent while rlock lives.
pub(super) fn guard_main(sock: OwnedFd, launch: &Launch, rlock: libc::pid_t) -> ! {
    let sock = sock.as_raw_fd();
    // SAFETY: plain syscall.
    let job = unsafe { libc::getpgrp() };
    // SAFETY: this fork has one thread, and never reads rlock's argv
    // (`launch` holds copies). The binary forks it while rlock has one
    // thread (see the module doc); a library caller may have more, whose
    // locks this copy may hold, but `rename` allocates nothing and takes
    // no lock.
    unsafe { crate::proctitle::rename(&[crate::proctitle::EXEC_GUARD.as_bytes()]) };
    // SAFETY: all plain syscalls on this (single-threaded) process.
    let (inherited, sigfd, timer) = unsafe {
        libc::setpgid(0, 0);
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
        let mut inh: Inherited = std::mem::zeroed();
        let ign = libc::SIG_IGN;
        for (i, &sig) in IGNORED.iter().enumerate() {
            set_action(sig, ign, &mut inh.actions[i]);
        }
        // Children's exits must queue up as zombies for us to reap (an
        // inherited SIG_IGN would have the kernel reap them silently).
        set_action(libc::SIGCHLD, libc::SIG_DFL, &mut inh.actions[CHLD]);
        let mut chld: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut chld);
        libc::sigaddset(&mut chld, libc::SIGCHLD);
        libc::pthread_sigmask(libc::SIG_BLOCK, &chld, &mut inh.mask);
        let sigfd = libc::signalfd(-1, &chld, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        let timer =
            libc::timerfd_create(libc::CLOCK_BOOTTIME, libc::TFD_CLOEXEC | libc::TFD_NONBLOCK);
        (inh, sigfd, timer)
    };
    if sigfd < 0 || timer < 0 {
        exit();
    }
    let mut buf = vec![0u8; MAX_MSG];
    // How to release should rlock die (see `release.rs`), as last sent:
    // copied into room made here, before the command runs.
    let mut release = vec![0u8; MAX_RELEASE];
    let mut release_len = 0;
    // Before the command starts: take the deadline, then the go.
    let main = loop {
        let n = recv(sock, &mut buf);
        match ToGuard::decode(&buf[..n]) {
            Ok(ToGuard::Deadline(at)) => arm(timer, at),
            Ok(ToGuard::Release(r)) => release_len = keep(&mut release, r),
            // A short deadline was always ignored, here as after the start.
            Err(Undecoded::Malformed(b'D')) => {}
            Ok(ToGuard::Spawn(_)) if expired(timer) => {
                // The kill deadline passed before the go was read (this
                // process was stopped or starved since rlock sent it): the
                // lease may be over, and the lock another's. Started now,
                // the command would run beside that holder until the timer
                // is next looked at, so it never starts; rlock hears what
                // it hears of a tree killed at the deadline.
                send(sock, &Report::Enforced.encode());
                send(sock, &Report::Empty.encode());
                exit()
            }
            Ok(ToGuard::Spawn(env)) => break spawn(launch, env, &inherited),
            _ => exit(), // rlock gave up (busy, error) or died
        }
    };
    let main = match main {
        Ok(pid) => {
            send(sock, &Report::Started(pid).encode());
            pid
        }
        Err(e) => {
            send(sock, &Report::SpawnFailed(e).encode());
            exit()
        }
    };
    // The command has its copies: keep nothing else open (no stdio pipe,
    // no Redis connection of rlock's) but the guard's own descriptors.
    // SAFETY: the guard owns every descriptor it has.
    unsafe { close_all_but(&[sock, sigfd, timer, launch.tty.unwrap_or(-1)]) };
    // SAFETY: as above.
    unsafe { crate::fd::stdio_to_null() };
    let me = std::process::id() as libc::pid_t;
    let mut rlock_alive = true;
    let mut main_done = false;
    loop {
        let mut fds = [
            crate::signals::pollin(if rlock_alive { sock } else { -1 }),
            crate::signals::pollin(sigfd),
            crate::signals::pollin(timer),
        ];
        // SAFETY: valid array of pollfds.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if n < 0 {
            continue; // EINTR
        }
        if fds[0].revents != 0 {
            let n = recv(sock, &mut buf);
            match ToGuard::decode(&buf[..n]) {
                Ok(ToGuard::Deadline(at)) => arm(timer, at),
                Ok(ToGuard::Signal(sig)) => tree::signal_all(me, sig),
                Ok(ToGuard::Release(r)) => release_len = keep(&mut release, r),
                Ok(ToGuard::Spawn(_)) | Err(Undecoded::Malformed(_) | Undecoded::Unknown(_)) => {}
                Err(Undecoded::Empty) => {
                    // rlock is gone: nothing may run on without it, and the
                    // terminal goes back to rlock's job (its shell or
                    // script), not to a dead group.
                    rlock_alive = false;
                    if let Some(tty) = launch.tty.filter(|_| launch.foreground) {
                        // First, as rlock's shell is already on its way.
                        // SAFETY: plain syscalls; SIGTTOU is ignored here.
                        unsafe {
                            if libc::tcgetpgrp(tty) == main {
                                libc::tcsetpgrp(tty, job);
                            }
                        }
                    }
                    tree::kill_all(me);
                }
            }
        }
        if fds[2].revents != 0 {
            let mut ticks = 0u64;
            // SAFETY: reads 8 bytes into a u64.
            if unsafe { libc::read(timer, (&mut ticks as *mut u64).cast(), 8) } == 8 {
                tree::kill_all(me);
                if rlock_alive {
                    send(sock, &Report::Enforced.encode());
                }
            }
        }
        if fds[1].revents != 0 {
            drain(sigfd);
        }
        // Reap whatever has exited (and note stops of the command).
        let empty = loop {
            let mut st = 0;
            // SAFETY: plain syscall.
            let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG | libc::WUNTRACED) };
            if pid == 0 {
                // Children left, but perhaps only keepers of an `acquire
                // --keep` that ran in the command: not the command's work,
                // and never waited for (see `tree::is_keeper`).
                if (!main_done && rlock_alive) || !tree::descendants(me).is_empty() {
                    break false;
                }
                // No live process is left, but some died since the waitpid
                // above: zombies the walk does not count, children of ours
                // or orphans re-parented to us as their parent died. Reap
                // them before saying "empty": a zombie is still a member of
                // its process group, and left to init (after we exit) it
                // kept a dead sub-job's group, still the terminal's
                // foreground group, looking alive to rlock, which then left
                // the terminal there (the script after it could not read
                // it). A zombie's children were re-parented before it died,
                // so none can turn up after this.
                // SAFETY: plain syscall; a null status pointer is allowed.
                while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
                break true;
            }
            if pid < 0 {
                break last_errno() == libc::ECHILD;
            }
            // Once the command is reaped its pid is free: a leftover that
            // left its group can get it, and is not the command.
            if pid == main && !main_done && rlock_alive {
                if libc::WIFSTOPPED(st) {
                    send(sock, &Report::Stopped(libc::WSTOPSIG(st)).encode());
                } else {
                    main_done = true;
                    send(sock, &Report::Exited(ExitStatus::from_raw(st)).encode());
                }
            }
        };
        if empty && (main_done || !rlock_alive) {
            if rlock_alive {
                send(sock, &Report::Empty.encode());
            } else if release_len > 0 && dead(rlock) {
                // rlock died holding the lock, and no process of the tree
                // is left to act under it: give back what rlock held (its
                // own holds only, see `release::settings`), so the lock
                // passes on now rather than when the lease ends. rlock
                // alive (it closed the socket itself) releases on its own.
                super::release::start(&release[..release_len]);
            }
            exit();
        }
    }
}

/// Close every descriptor of this process but those in `keep` (negative
/// entries are ignored): close_range (Linux 5.9) between the kept ones,
/// else each one /proc lists.
///
/// # Safety
/// Only in a process that owns all its descriptors (the guard; the keeper
/// once detached): nothing else may be using the ones closed.
pub(crate) unsafe fn close_all_but(keep: &[RawFd]) {
    let mut keep = keep.to_vec();
    keep.sort_unstable();
    let mut from = 0;
    let mut ranged = true;
    // SAFETY: plain syscalls; the caller owns the descriptors.
    unsafe {
        for &k in keep.iter().filter(|&&k| k >= 0) {
            if k > from {
                ranged &= libc::syscall(libc::SYS_close_range, from, k - 1, 0) == 0;
            }
            from = k + 1;
        }
        ranged &= libc::syscall(libc::SYS_close_range, from, u32::MAX, 0) == 0;
    }
    if ranged {
        return;
    }
    let open: Vec<RawFd> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    for fd in open.into_iter().filter(|fd| !keep.contains(fd)) {
        // SAFETY: as above (the directory's own descriptor is closed by
        // now: closing its stale number fails harmlessly).
        unsafe { libc::close(fd) };
    }
}

/// Copy release settings into `room`, all or nothing (a longer message
/// than rlock sends is not kept); returns their length, 0 for none.
fn keep(room: &mut [u8], settings: &[u8]) -> usize {
    match room.get_mut(..settings.len()) {
        Some(to) => {
            to.copy_from_slice(settings);
            settings.len()
        }
        None => 0,
    }
}

/// Has `rlock` exited (this process re-parented)? Looked at for up to a
/// second: its end of the socket closes as it exits, a moment before the
/// kernel re-parents its children. A live rlock closes it only as it
/// returns (`Guard`'s drop), having released or about to release itself.
fn dead(rlock: libc::pid_t) -> bool {
    for _ in 0..100 {
        // SAFETY: plain syscalls.
        unsafe {
            if libc::getppid() != rlock {
                return true;
            }
            libc::poll(std::ptr::null_mut(), 0, 10);
        }
    }
    false
}

/// Set the timer to `at`, an absolute CLOCK_BOOTTIME point (None: off).
fn arm(timer: RawFd, at: Option<Duration>) {
    let at = at.unwrap_or(Duration::ZERO);
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: at.as_secs() as libc::time_t,
            tv_nsec: at.subsec_nanos() as libc::c_long,
        },
    };
    // SAFETY: plain syscall; a zero it_value disarms the timer.
    unsafe { libc::timerfd_settime(timer, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
}

/// Has the timer fired since it was last armed (and not been read)?
fn expired(timer: RawFd) -> bool {
    let mut ticks = 0u64;
    // SAFETY: reads 8 bytes into a u64; the timer is non-blocking.
    unsafe { libc::read(timer, (&mut ticks as *mut u64).cast(), 8) == 8 }
}

fn drain(sigfd: RawFd) {
    let mut info = [0u8; 128];
    // SAFETY: reads whole signalfd_siginfo records into our buffer.
    while unsafe { libc::read(sigfd, info.as_mut_ptr().cast(), info.len()) } > 0 {}
}

fn recv(sock: RawFd, buf: &mut [u8]) -> usize {
    loop {
        // SAFETY: plain syscall into our buffer.
        let n = unsafe { libc::recv(sock, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n >= 0 {
            return n as usize;
        }
        if last_errno() != libc::EINTR {
            return 0;
        }
    }
}

fn send(sock: RawFd, msg: &[u8]) {
    // SAFETY: plain syscall; MSG_NOSIGNAL as rlock is maybe gone.
    unsafe { libc::send(sock, msg.as_ptr().cast(), msg.len(), libc::MSG_NOSIGNAL) };
}

fn exit() -> ! {
    // SAFETY: ends the guard without running the forked copy of rlock's
    // atexit handlers or destructors.
    unsafe { libc::_exit(0) }
}
