//! The loss record a keeper leaves (`P{K}:lost`, shown by `rlock status`
//! for an hour): writing it, and what it says was done.

use std::time::Duration;

use super::{LOST_RECORD_TTL, LostRecord};
use crate::conn::{ConnectOptions, Server};
use crate::exec::OnLost;
use crate::lock::LockName;
use crate::{Error, Result};

/// What a loss record says was done: nothing under `--on-lost ignore` or
/// if the watched process had exited; else the policy's signals, unless
/// the first could not be sent (`sent`, EPERM: the process runs as a user
/// the keeper cannot signal), which it then says instead of a signal.
pub(super) fn action_taken(
    on_lost: OnLost,
    grace: Duration,
    gone: bool,
    sent: Option<&(&str, std::io::Result<()>)>,
    pid: i32,
) -> String {
    let planned = match on_lost {
        OnLost::Ignore => return "nothing done (--on-lost ignore)".to_string(),
        _ if gone => return "nothing done (the process had exited)".to_string(),
        OnLost::Term => format!(
            "SIGTERM sent, SIGKILL after {} if it still ran",
            humantime::format_duration(grace)
        ),
        OnLost::Kill => "SIGKILL sent".to_string(),
    };
    match sent {
        Some((sig, Err(e))) => {
            format!("nothing done: {sig} could not be sent to pid {pid} ({e}); it may still run")
        }
        _ => planned,
    }
}

impl LostRecord {
    /// A record made now, on this host, of `pid`'s hold lost for `why`.
    pub(super) fn now(pid: i32, why: &str, action: String) -> LostRecord {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, crate::duration::millis);
        LostRecord {
            host: crate::lock::HolderInfo::current(None).host,
            pid: pid as u32,
            when: crate::lock::format_ms(ms),
            when_ms: ms,
            why: why.to_string(),
            action,
        }
    }
}

/// Write `record` on every server that answers (it expires after
/// [`LOST_RECORD_TTL`]), but not over a key without a TTL: every loss
/// record has one, so that is data rlock did not write (lua/common.lua).
/// A PTTL the user may not run (an ACL without +pttl) leaves it unknown,
/// and the record is written.
pub fn record_loss(opts: &ConnectOptions, name: &LockName, record: &LostRecord) -> Result<()> {
    let json = serde_json::to_string(record).map_err(|e| Error::Protocol(e.to_string()))?;
    let mut last = Ok(());
    for server in Server::open_all(opts)? {
        let res = server.connect().and_then(|mut c| {
            let ttl: redis::RedisResult<i64> =
                redis::cmd("PTTL").arg(name.lost_key()).query(&mut c);
            if matches!(ttl, Ok(-1)) {
                return Err(Error::Conflict(format!(
                    "{} holds data rlock did not write: the loss is not recorded there",
                    name.lost_key()
                )));
            }
            redis::cmd("SET")
                .arg(name.lost_key())
                .arg(&json)
                .arg("PX")
                .arg(crate::duration::millis(LOST_RECORD_TTL))
                .query::<()>(&mut c)
                .map_err(|e| Error::from_redis(e, "record a lost lock"))
        });
        if res.is_err() {
            last = res;
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_refused_is_not_recorded_as_sent() {
        let grace = Duration::from_secs(10);
        let planned = "SIGTERM sent, SIGKILL after 10s if it still ran";
        let ok = ("SIGTERM", Ok(()));
        assert_eq!(
            action_taken(OnLost::Term, grace, false, Some(&ok), 7),
            planned
        );
        assert_eq!(action_taken(OnLost::Term, grace, false, None, 7), planned);
        let eperm = (
            "SIGTERM",
            Err(std::io::Error::from_raw_os_error(libc::EPERM)),
        );
        let a = action_taken(OnLost::Term, grace, false, Some(&eperm), 7);
        assert!(
            a.starts_with("nothing done: SIGTERM could not be sent to pid 7 (")
                && a.contains("not permitted")
                && !a.contains("sent,"),
            "{a}"
        );
    }

    #[test]
    fn nothing_is_done_when_ignored_or_already_gone() {
        let grace = Duration::from_secs(1);
        let eperm = (
            "SIGKILL",
            Err(std::io::Error::from_raw_os_error(libc::EPERM)),
        );
        assert_eq!(
            action_taken(OnLost::Ignore, grace, false, Some(&eperm), 7),
            "nothing done (--on-lost ignore)"
        );
        assert_eq!(
            action_taken(OnLost::Kill, grace, true, Some(&eperm), 7),
            "nothing done (the process had exited)"
        );
        assert_eq!(
            action_taken(OnLost::Kill, grace, false, None, 7),
            "SIGKILL sent"
        );
    }
}
