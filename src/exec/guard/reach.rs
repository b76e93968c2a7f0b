//! exec's side of the guard process: its set-up, and its [`Reach`], the
//! guard's own tree (the hold core's guard loop, `hold::guard::run`, does
//! the rest; see the module doc of [`super`]).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use super::handle::Launch;
use super::spawn::{CHLD, IGNORED, Inherited, set_action, spawn};
use super::{last_errno, tree};
use crate::hold::guard::wire::Report;
use crate::hold::guard::{self, OnDeath, OnFinish, Page, Reach, State};

/// The guard's tree: the command it starts and everything below it.
struct Tree<'a> {
    launch: &'a Launch<'a>,
    inherited: Inherited,
    sock: RawFd,
    sigfd: RawFd,
    /// rlock's job (process group), the terminal's when rlock dies.
    job: libc::pid_t,
    me: libc::pid_t,
    /// The command, once started.
    main: Option<libc::pid_t>,
    main_done: bool,
}

pub(super) fn guard_main(sock: OwnedFd, launch: &Launch, page: Page) -> ! {
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
    let (inherited, sigfd) = unsafe {
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
        (inh, sigfd)
    };
    if sigfd < 0 {
        guard::exit();
    }
    let mut tree = Tree {
        launch,
        inherited,
        sock,
        sigfd,
        job,
        me: std::process::id().cast_signed(),
        main: None,
        main_done: false,
    };
    // rlock's death: SIGKILL at once (nobody is left to report to); its
    // end: what is left is killed too.
    let state = State::new(OnDeath::Kill, OnFinish::Kill, true);
    guard::run(sock, page, &mut tree, state)
}

impl Reach for Tree<'_> {
    fn signal(&mut self, sig: i32) {
        if sig == libc::SIGKILL {
            tree::kill_all(self.me);
        } else {
            tree::signal_all(self.me, sig);
        }
    }

    fn fd(&self) -> RawFd {
        self.sigfd
    }

    fn drain(&mut self) {
        let mut info = [0u8; 128];
        // SAFETY: reads whole signalfd_siginfo records into our buffer.
        while unsafe { libc::read(self.sigfd, info.as_mut_ptr().cast(), info.len()) } > 0 {}
    }

    /// Reap whatever has exited (and report the command's stops and exit);
    /// empty once no descendant is left and the command is done (or rlock
    /// is gone).
    fn empty(&mut self, rlock_alive: bool) -> bool {
        let Some(main) = self.main else {
            return false;
        };
        let empty = loop {
            let mut st = 0;
            // SAFETY: plain syscall.
            let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG | libc::WUNTRACED) };
            if pid == 0 {
                // Children left, but perhaps only keepers of an `acquire
                // --keep` that ran in the command: not the command's work,
                // and never waited for (see `tree::is_keeper`).
                if (!self.main_done && rlock_alive) || !tree::descendants(self.me).is_empty() {
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
            if pid == main && !self.main_done && rlock_alive {
                if libc::WIFSTOPPED(st) {
                    self.report(&Report::Stopped(libc::WSTOPSIG(st)).encode());
                } else {
                    self.main_done = true;
                    self.report(&Report::Exited(ExitStatus::from_raw(st)).encode());
                }
            }
        };
        empty && (self.main_done || !rlock_alive)
    }

    fn start(&mut self, env: &[u8], keep: &[RawFd]) -> bool {
        match spawn(self.launch, env, &self.inherited) {
            Ok(pid) => {
                self.report(&Report::Started(pid).encode());
                self.main = Some(pid);
            }
            Err(e) => {
                self.report(&Report::SpawnFailed(e).encode());
                return false;
            }
        }
        // The command has its copies: keep nothing else open (no stdio
        // pipe, no Redis connection of rlock's) but the guard's own
        // descriptors.
        let mut keep = keep.to_vec();
        keep.extend([self.sigfd, self.launch.tty.unwrap_or(-1)]);
        // SAFETY: the guard owns every descriptor it has.
        unsafe { guard::close_all_but(&keep) };
        // SAFETY: as above.
        unsafe { crate::fd::stdio_to_null() };
        true
    }

    /// rlock is gone: the terminal goes back to rlock's job (its shell or
    /// script), not to a dead group.
    fn hand_back_terminal(&mut self) {
        if let (Some(tty), Some(main)) = (
            self.launch.tty.filter(|_| self.launch.foreground),
            self.main,
        ) {
            // SAFETY: plain syscalls; SIGTTOU is ignored here.
            unsafe {
                if libc::tcgetpgrp(tty) == main {
                    libc::tcsetpgrp(tty, self.job);
                }
            }
        }
    }

    fn report(&mut self, msg: &[u8]) {
        guard::send(self.sock, msg);
    }
}
