//! The loss record a keeper leaves (`P{K}:lost`, shown by `rlock status`
//! for an hour): writing it, and what it says was done.

use super::{LOST_RECORD_TTL, LostRecord};
use crate::conn::{ConnectOptions, Server};
use crate::lock::LockName;
use crate::{Error, Result};

/// A loss record's action once the first signal has gone out: `planned`
/// ("SIGTERM sent, ..."), or, if the watched process could not be
/// signalled (EPERM: it runs as a user the keeper's cannot signal), what
/// really happened.
pub(super) fn action_after(
    planned: &str,
    sig: &str,
    pid: i32,
    sent: &std::io::Result<()>,
) -> String {
    match sent {
        Ok(()) => planned.to_string(),
        Err(e) => {
            format!("nothing done: {sig} could not be sent to pid {pid} ({e}); it may still run")
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
        let planned = "SIGTERM sent, SIGKILL after 10s if it still ran";
        assert_eq!(action_after(planned, "SIGTERM", 7, &Ok(())), planned);
        let eperm = Err(std::io::Error::from_raw_os_error(libc::EPERM));
        let a = action_after(planned, "SIGTERM", 7, &eperm);
        assert!(
            a.starts_with("nothing done: SIGTERM could not be sent to pid 7 (")
                && a.contains("not permitted")
                && !a.contains("sent,"),
            "{a}"
        );
    }
}
