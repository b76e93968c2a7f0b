//! The release protocol's client end: `rlock release` tells the keeper of
//! its token first (see the module doc of [`super`], "Release, and loss").

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::time::Duration;

use crate::lock::LockName;
use crate::{Error, Locker, Released, Result, Token};

/// The abstract socket name of the keeper of `token`: a hash, so the name
/// (visible to every local user in /proc/net/unix) reveals nothing.
fn socket_name(token: &Token) -> Vec<u8> {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_str().as_bytes());
    let hex: String = d.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("rlock-keep-{hex}").into_bytes()
}

pub(super) fn socket_addr(token: &Token) -> Result<SocketAddr> {
    SocketAddr::from_abstract_name(socket_name(token))
        .map_err(|e| Error::Protocol(format!("keeper socket name: {e}")))
}

/// Is the peer our own user, or root (SO_PEERCRED)?
pub(super) fn trusted(stream: &UnixStream) -> bool {
    let mut cred = libc::ucred {
        pid: 0,
        uid: u32::MAX,
        gid: 0,
    };
    #[allow(
        clippy::cast_possible_truncation,
        reason = "a ucred is 12 bytes, far below socklen_t::MAX"
    )]
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt fills `cred`, of the size given.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    // SAFETY: plain syscall.
    rc == 0 && (cred.uid == 0 || cred.uid == unsafe { libc::geteuid() })
}

/// Release `token`'s hold(s) on `key` as [`Locker::release_with`] does,
/// telling this host's keeper of the token first, if there is one, so it
/// stops renewing (and exits once the lock is free) instead of taking the
/// release for a loss.
pub fn release(
    locker: &mut Locker,
    key: &str,
    token: &Token,
    all: bool,
    min_hold: Option<Duration>,
) -> Result<Released> {
    let keeper = announce(&locker.name(key)?, token, locker.timeout());
    let how = crate::Release::holds(all, min_hold)?;
    let res = locker.release_with(key, token, &how);
    if let Some(mut s) = keeper {
        let _ = s.write_all(Verdict::of(&res).line().as_bytes());
    }
    res
}

/// The release message: `release LOCK` (its Redis key).
const RELEASE: &str = "release";
/// The adopt message of a re-entered `acquire --keep`: `adopt LOCK`.
const ADOPT: &str = "adopt";

/// What a keeper is asked, on its socket.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Asked {
    /// A release of our lock is about to run: pause, await the verdict.
    Release,
    /// A re-entry in the script added a hold: it is ours too.
    Adopt,
}

impl Asked {
    /// The request in `line`, if it is about `lock` (its Redis key). A
    /// message about another lock with this token (the socket is named
    /// after the token alone) is none of the keeper's: it gets no "ok", so
    /// the releaser goes on without it; were it heard, its "nothing held"
    /// would end the keeper without a release, and the lease would run out
    /// under the script.
    pub(super) fn parse(line: &str, lock: &str) -> Option<Asked> {
        let (what, about) = line.trim_end_matches('\n').split_once(' ')?;
        if about != lock {
            return None;
        }
        match what {
            RELEASE => Some(Asked::Release),
            ADOPT => Some(Asked::Adopt),
            _ => None,
        }
    }
}

/// How a release announced to the keeper ended, sent after it.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// The lock is free (or was already).
    Released,
    /// One hold was given back; this many remain.
    Held(u64),
    /// The release failed (or the releaser said nothing): held as before.
    Failed,
}

impl Verdict {
    fn of(res: &Result<Released>) -> Verdict {
        match res {
            Ok(Released::Released | Released::NotHeld) => Verdict::Released,
            Ok(Released::StillHeld(n)) => Verdict::Held(*n),
            Err(_) => Verdict::Failed,
        }
    }

    fn line(&self) -> String {
        match self {
            Verdict::Released => "released\n".into(),
            Verdict::Held(n) => format!("held {n}\n"),
            Verdict::Failed => "held\n".into(),
        }
    }

    /// The verdict in `line` (anything else, a releaser that died
    /// included, is [`Verdict::Failed`]: renew on).
    pub(super) fn parse(line: &str) -> Verdict {
        match line.trim() {
            "released" => Verdict::Released,
            l => l
                .strip_prefix("held ")
                .and_then(|n| n.parse().ok())
                .map_or(Verdict::Failed, Verdict::Held),
        }
    }
}

/// Tell this host's keeper of `token` for `lock`, if there is one, that
/// a re-entry in its script (`acquire`, `acquire --keep`, `rw` without a
/// command: the script's own holds, never an exec's) added a hold: it
/// renews it with its own and gives it back when the script ends, and a
/// release in the script gives back one of these before any other.
/// Whether a keeper said "ok".
pub fn adopt(lock: &LockName, token: &Token, timeout: Duration) -> bool {
    ask(lock, token, timeout, ADOPT).is_some()
}

/// Connect to the keeper of `token` for `lock` and have it pause; None if
/// there is none (or it keeps another lock, or does not answer in time).
fn announce(lock: &LockName, token: &Token, timeout: Duration) -> Option<UnixStream> {
    ask(lock, token, timeout, RELEASE)
}

/// Send `what LOCK` to the keeper of `token`: its connection once it
/// answered "ok", else None.
fn ask(lock: &LockName, token: &Token, timeout: Duration, what: &str) -> Option<UnixStream> {
    let s = UnixStream::connect_addr(&socket_addr(token).ok()?).ok()?;
    // The keeper may be in the middle of a renewal (bounded by its own
    // connect timeout).
    let wait = timeout.max(Duration::from_secs(1)) * 2;
    s.set_read_timeout(Some(wait)).ok()?;
    s.set_write_timeout(Some(wait)).ok()?;
    (&s).write_all(format!("{what} {}\n", lock.redis_key()).as_bytes())
        .ok()?;
    let mut answer = String::new();
    BufReader::new(&s).read_line(&mut answer).ok()?;
    (answer.trim() == "ok").then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_heard_for_their_own_lock_only() {
        let lock = "rlock:{k}";
        assert_eq!(
            Asked::parse("release rlock:{k}\n", lock),
            Some(Asked::Release)
        );
        assert_eq!(Asked::parse("adopt rlock:{k}", lock), Some(Asked::Adopt));
        assert_eq!(Asked::parse("release rlock:{other}\n", lock), None);
        assert_eq!(Asked::parse("release\n", lock), None);
        assert_eq!(Asked::parse("steal rlock:{k}\n", lock), None);
        assert_eq!(Asked::parse("release rlock:{k} extra\n", lock), None);
        assert_eq!(Asked::parse("", lock), None);
    }

    #[test]
    fn verdicts_round_trip() {
        for v in [
            Verdict::Released,
            Verdict::Held(0),
            Verdict::Held(7),
            Verdict::Failed,
        ] {
            assert_eq!(Verdict::parse(&v.line()), v);
        }
        assert_eq!(Verdict::of(&Ok(Released::NotHeld)), Verdict::Released);
        assert_eq!(Verdict::of(&Ok(Released::StillHeld(2))), Verdict::Held(2));
        // A releaser that died mid-way, or garbage: renew on.
        assert_eq!(Verdict::parse(""), Verdict::Failed);
        assert_eq!(Verdict::parse("held x"), Verdict::Failed);
        assert_eq!(Verdict::parse("held"), Verdict::Failed);
    }

    #[test]
    fn socket_names_hide_the_token() {
        let t = Token::generate();
        let name = String::from_utf8(socket_name(&t)).unwrap();
        assert!(name.starts_with("rlock-keep-"), "{name}");
        assert_eq!(name.len(), "rlock-keep-".len() + 32);
        assert!(!name.contains(t.as_str()));
        assert_eq!(socket_name(&t), socket_name(&t.clone()));
        assert_ne!(socket_name(&t), socket_name(&Token::generate()));
    }
}
