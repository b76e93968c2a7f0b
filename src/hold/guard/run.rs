//! The guard's loop: the socket, the timer and the reach turned into
//! [`Event`]s, [`decide`]'s actions into syscalls (see the module doc of
//! [`super`] for what it promises).

use std::os::fd::RawFd;

use super::release;
use super::wire::{MAX_MSG, MAX_RELEASE, Report, ToGuard, Undecoded};
use super::{Action, Event, HolderIs, LOOK_EVERY, Page, Reach, State, decide, last_errno, wake_at};
use crate::clock::BootTime;

/// Guard the hold of the holder at the other end of `sock` until there is
/// nothing left to do, then exit (never returns into the forked copy).
pub(crate) fn run(sock: RawFd, page: Page, reach: &mut impl Reach, state: State) -> ! {
    // SAFETY: plain syscall; a new descriptor or -1 (then the loop looks
    // at the clock every quarter second).
    let timer = unsafe {
        libc::timerfd_create(libc::CLOCK_BOOTTIME, libc::TFD_CLOEXEC | libc::TFD_NONBLOCK)
    };
    let mut g = Guard {
        sock,
        timer,
        reach,
        state,
        // How to release should the holder die (see `release.rs`), as last
        // sent: copied into room made here, before the command runs.
        release: vec![0u8; MAX_RELEASE],
        release_len: 0,
    };
    let mut buf = vec![0u8; MAX_MSG];
    // The deadline of the last `D` message: the one the go is held to.
    let mut sent: Option<Option<BootTime>> = None;
    loop {
        g.act(Event::Deadline(page.deadline()), &[]);
        g.act(Event::Tick, &[]);
        let alive = g.state.holder == HolderIs::Alive;
        let wake = wake_at(&g.state);
        arm(timer, wake);
        let reach_fd = g.reach.fd();
        let mut wait = if timer < 0 {
            wake.map(|w| w.remaining().min(LOOK_EVERY * 2))
        } else {
            None
        };
        if !alive && reach_fd < 0 {
            wait = Some(wait.map_or(LOOK_EVERY, |w| w.min(LOOK_EVERY)));
        }
        let mut fds = [
            crate::signals::pollin(if alive { sock } else { -1 }),
            crate::signals::pollin(reach_fd),
            crate::signals::pollin(timer),
        ];
        let ms = wait.map_or(-1, |w| {
            libc::c_int::try_from(w.as_millis().max(1)).unwrap_or(libc::c_int::MAX)
        });
        // SAFETY: a valid array of pollfds.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n < 0 {
            continue; // EINTR
        }
        if fds[0].revents != 0 {
            let n = recv(sock, &mut buf);
            match ToGuard::decode(&buf[..n]) {
                // The deadline moved earlier: the page has it (read above).
                Ok(ToGuard::Deadline(at)) => sent = Some(at.map(BootTime::from_since_boot)),
                Err(Undecoded::Malformed(_) | Undecoded::Unknown(_)) => {}
                Ok(ToGuard::Signal(sig)) => g.reach.signal(sig),
                Ok(ToGuard::Release(r)) => {
                    g.release_len = keep(&mut g.release, r);
                    g.act(Event::Release(g.release_len > 0), &[]);
                }
                Ok(ToGuard::Spawn(env)) => {
                    // Held to the deadline rlock sent before the go, not to
                    // one its renewals set while this guard was stopped:
                    // rlock may have waited long for the start, and a
                    // command started that late is refused (decide.rs).
                    g.act(Event::Deadline(sent.unwrap_or(page.deadline())), &[]);
                    g.act(Event::Go, env);
                }
                Err(Undecoded::Empty) => {
                    let finished = page.finished();
                    g.act(Event::Closed { finished }, &[]);
                }
            }
        }
        if fds[2].revents != 0 {
            let mut ticks = 0u64;
            // SAFETY: reads 8 bytes into a u64; the timer is non-blocking.
            unsafe { libc::read(timer, (&mut ticks as *mut u64).cast(), 8) };
        }
        if fds[1].revents != 0 {
            g.reach.drain();
        }
        if g.reach.empty(g.state.holder == HolderIs::Alive) {
            g.act(Event::Empty, &[]);
        }
    }
}

struct Guard<'a, R> {
    sock: RawFd,
    timer: RawFd,
    reach: &'a mut R,
    state: State,
    release: Vec<u8>,
    release_len: usize,
}

impl<R: Reach> Guard<'_, R> {
    /// Decide on `event` now and carry the actions out (`env`: the go's).
    fn act(&mut self, event: Event, env: &[u8]) {
        for action in decide(&mut self.state, event, BootTime::now()) {
            match action {
                Action::Start => {
                    if !self.reach.start(env, &[self.sock, self.timer]) {
                        exit();
                    }
                }
                Action::Terminate => self.reach.signal(libc::SIGTERM),
                Action::Kill => self.reach.signal(libc::SIGKILL),
                Action::ReportEnforced => self.reach.report(&Report::Enforced.encode()),
                Action::ReportEmpty => self.reach.report(&Report::Empty.encode()),
                Action::HandBackTerminal => self.reach.hand_back_terminal(),
                Action::Release => release::start(&self.release[..self.release_len]),
                Action::Exit => exit(),
            }
        }
    }
}

/// Copy release settings into `room`, all or nothing (a longer message
/// than the holder sends is not kept); returns their length, 0 for none.
fn keep(room: &mut [u8], settings: &[u8]) -> usize {
    match room.get_mut(..settings.len()) {
        Some(to) => {
            to.copy_from_slice(settings);
            settings.len()
        }
        None => 0,
    }
}

/// Set the timer to `at`, an absolute CLOCK_BOOTTIME point (None: off).
fn arm(timer: RawFd, at: Option<BootTime>) {
    if timer < 0 {
        return;
    }
    let ns = at.map_or(0, |at| crate::duration::nanos(at.since_boot()).max(1));
    let spec = libc::itimerspec {
        it_interval: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: libc::timespec {
            tv_sec: libc::time_t::try_from(ns / 1_000_000_000).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::try_from(ns % 1_000_000_000).unwrap_or(0),
        },
    };
    // SAFETY: plain syscall on our timer; a zero it_value disarms it.
    unsafe { libc::timerfd_settime(timer, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
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

/// Send `msg` to the holder (MSG_NOSIGNAL: it may be gone).
pub(crate) fn send(sock: RawFd, msg: &[u8]) {
    // SAFETY: plain syscall.
    unsafe { libc::send(sock, msg.as_ptr().cast(), msg.len(), libc::MSG_NOSIGNAL) };
}

pub(crate) fn exit() -> ! {
    // SAFETY: ends the guard without running the forked copy of the
    // holder's atexit handlers or destructors.
    unsafe { libc::_exit(0) }
}
