//! The guard's wire format: what rlock and the guard say to each other,
//! one SOCK_SEQPACKET datagram per message, a tag byte first, integers
//! little-endian. Both directions are here, each an enum with its
//! `encode` beside its `decode`, so the two halves cannot drift apart.
//!
//! rlock to the guard ([`ToGuard`]):
//!
//! | tag   | body                    | message                          |
//! |-------|-------------------------|----------------------------------|
//! | `D`   | u64 ns since boot       | deadline set earlier (0: none)   |
//! | `K`   | i32 signal              | signal the whole tree now        |
//! | `S`   | `K=V` NUL-separated     | start the command, `K=V` added   |
//! | `R`   | JSON (`release.rs`)     | how to release if rlock dies     |
//!
//! The kill deadline itself is on the page holder and guard share
//! (`page.rs`): a `D` only wakes the guard to read it, sent when the
//! deadline is first set or moved earlier; exec's go is held to the
//! deadline of the last `D` before it (see `run.rs`).
//!
//! The guard to rlock ([`Report`]):
//!
//! | tag   | body            | report                           |
//! |-------|-----------------|----------------------------------|
//! | `P`   | i32 pid         | the command started              |
//! | `F`   | i32 errno       | the command could not be started |
//! | `T`   | i32 signal      | the command was stopped          |
//! | `E`   | i32 wait status | the command exited               |
//! | `L`   |                 | deadline passed, tree SIGKILLed  |
//! | `Z`   |                 | no descendant left, guard exits  |
//!
//! Decoding is lenient in the ways the guard has always been, since
//! neither side can ask the other to repeat: a deadline longer than 9
//! bytes is read from its first 9, a short one is ignored; a signal must
//! be exactly 5 bytes. A report of the wrong length, an unknown tag, or no
//! message at all reads as [`Report::Gone`].

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use crate::{Error, Result};

/// The longest message rlock sends the guard (the guard's receive
/// buffer: SOCK_SEQPACKET cuts a longer datagram to this).
pub(crate) const MAX_MSG: usize = 1 << 16;

/// The longest report the guard sends (rlock's receive buffer; a longer
/// datagram arrives cut to this and decodes as [`Report::Gone`]).
pub(crate) const MAX_REPORT: usize = 16;

/// What rlock tells the guard.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ToGuard<'a> {
    /// The kill deadline was set to this CLOCK_BOOTTIME point (None:
    /// never), first or earlier than before: read the page now.
    Deadline(Option<Duration>),
    /// Send this signal to every process of the tree now.
    Signal(i32),
    /// Start the command with these NUL-separated `K=V` pairs added to
    /// rlock's environment (see [`spawn_message`]).
    Spawn(&'a [u8]),
    /// Should rlock die, give back its holds once the tree is gone, with
    /// these settings (a JSON `release::Settings`; replaces the last).
    Release(&'a [u8]),
}

/// Why a message to the guard did not decode.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Undecoded {
    /// No bytes: rlock's end of the socket closed (or a read failed).
    Empty,
    /// A known tag with a body of the wrong length.
    Malformed(u8),
    /// A tag that means nothing.
    Unknown(u8),
}

impl ToGuard<'_> {
    pub(crate) fn encode(&self) -> Vec<u8> {
        match self {
            ToGuard::Deadline(at) => {
                // 0 means none on the wire, so a deadline at boot itself
                // is sent as 1 ns after.
                let ns = at.map_or(0, |d| crate::duration::nanos(d).max(1));
                let mut msg = vec![b'D'];
                msg.extend_from_slice(&ns.to_le_bytes());
                msg
            }
            ToGuard::Signal(sig) => {
                let mut msg = vec![b'K'];
                msg.extend_from_slice(&sig.to_le_bytes());
                msg
            }
            ToGuard::Spawn(env) => {
                let mut msg = vec![b'S'];
                msg.extend_from_slice(env);
                msg
            }
            ToGuard::Release(settings) => {
                let mut msg = vec![b'R'];
                msg.extend_from_slice(settings);
                msg
            }
        }
    }

    pub(crate) fn decode(msg: &[u8]) -> Result<ToGuard<'_>, Undecoded> {
        let (&tag, body) = msg.split_first().ok_or(Undecoded::Empty)?;
        match tag {
            b'D' => {
                let ns = body
                    .get(..8)
                    .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
                    .ok_or(Undecoded::Malformed(tag))?;
                Ok(ToGuard::Deadline(
                    (ns != 0).then(|| Duration::from_nanos(ns)),
                ))
            }
            b'K' => {
                let sig: [u8; 4] = body.try_into().map_err(|_| Undecoded::Malformed(tag))?;
                Ok(ToGuard::Signal(i32::from_le_bytes(sig)))
            }
            b'S' => Ok(ToGuard::Spawn(body)),
            b'R' => Ok(ToGuard::Release(body)),
            _ => Err(Undecoded::Unknown(tag)),
        }
    }
}

/// The go to start the command with `env` added to rlock's environment,
/// refused if longer than the guard reads: a longer one would be cut (or
/// not sent at all), and rlock would wait for a start that never comes.
/// Only an RLOCK_HELD set by hand gets that long.
pub(crate) fn spawn_message(env: &[(&str, &str)]) -> Result<Vec<u8>> {
    let mut pairs = Vec::new();
    for (k, v) in env {
        pairs.extend_from_slice(k.as_bytes());
        pairs.push(b'=');
        pairs.extend_from_slice(v.as_bytes());
        pairs.push(0);
    }
    let msg = ToGuard::Spawn(&pairs).encode();
    if msg.len() > MAX_MSG {
        return Err(Error::invalid(format!(
            "cannot start the command: its RLOCK_* variables would take {} bytes, more \
             than {MAX_MSG}; is RLOCK_HELD in the environment set by hand?",
            msg.len()
        )));
    }
    Ok(msg)
}

/// The longest release settings rlock sends, and what exec sends while
/// it waits at most, all together: with the deadline and the longest go
/// they fit the socket's buffer before the guard reads any
/// (a go dropped on a full socket would leave rlock waiting for a start
/// that never comes). Longer ones are not sent: no release after
/// rlock's death then.
pub(crate) const MAX_RELEASE: usize = 16 << 10;

/// What the guard tells rlock.
#[derive(Debug)]
pub(crate) enum Report {
    /// The command runs with this pid (and process group).
    Started(libc::pid_t),
    /// The command could not be started.
    SpawnFailed(std::io::Error),
    /// The command was stopped by this signal.
    Stopped(i32),
    /// The command exited with this wait status.
    Exited(ExitStatus),
    /// The kill deadline passed and the guard SIGKILLed the tree.
    Enforced,
    /// No descendant is left; the guard has exited.
    Empty,
    /// The guard is gone without saying "empty" (killed by someone). Not
    /// a message the guard sends: what no message (its end closed) or an
    /// unreadable one decodes as. It encodes as the empty message.
    Gone,
}

impl Report {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let tagged = |tag: u8, value: i32| {
            let mut msg = vec![tag];
            msg.extend_from_slice(&value.to_le_bytes());
            msg
        };
        match self {
            Report::Started(pid) => tagged(b'P', *pid),
            // An error without an errno (none the guard makes) as ENOEXEC.
            Report::SpawnFailed(e) => tagged(b'F', e.raw_os_error().unwrap_or(libc::ENOEXEC)),
            Report::Stopped(sig) => tagged(b'T', *sig),
            Report::Exited(st) => tagged(b'E', st.into_raw()),
            Report::Enforced => vec![b'L'],
            Report::Empty => vec![b'Z'],
            Report::Gone => Vec::new(),
        }
    }

    pub(crate) fn decode(msg: &[u8]) -> Report {
        let int = |b: &[u8]| i32::from_le_bytes(b.try_into().expect("4 bytes"));
        match msg {
            [b'P', v @ ..] if v.len() == 4 => Report::Started(int(v)),
            [b'F', v @ ..] if v.len() == 4 => {
                Report::SpawnFailed(std::io::Error::from_raw_os_error(int(v)))
            }
            [b'T', v @ ..] if v.len() == 4 => Report::Stopped(int(v)),
            [b'E', v @ ..] if v.len() == 4 => Report::Exited(ExitStatus::from_raw(int(v))),
            [b'L'] => Report::Enforced,
            [b'Z'] => Report::Empty,
            _ => Report::Gone,
        }
    }
}

#[cfg(test)]
mod tests;
