//! A lock's history as the library reads and writes it: how much is kept,
//! how a release ends, and one event.

use std::time::Duration;

use serde::Serialize;

use super::request::HolderInfo;
use crate::duration::human;
use crate::error::Setting;
use crate::{Error, Result, msg};

/// How much history each lock keeps (see `rlock history`, lua/common.lua):
/// about `events` events (the list is trimmed back to `events` once it is
/// an eighth over: up to events/8 more may stay), each lock's history and
/// counters kept for `retention` after its last event. `events` 0 keeps
/// the counters only. Valid by construction: made by [`HistoryLimits::new`],
/// which refuses limits out of range, or [`HistoryLimits::default`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistoryLimits {
    pub(crate) events: u32,
    pub(crate) retention: Duration,
}

/// Most events [`HistoryLimits::events`] may keep per lock.
pub const MAX_HISTORY_EVENTS: u32 = 100_000;
/// Longest [`HistoryLimits::retention`].
pub const MAX_HISTORY_RETENTION: Duration = Duration::from_secs(366 * 24 * 3600);

impl Default for HistoryLimits {
    fn default() -> Self {
        HistoryLimits {
            events: 200,
            retention: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

impl HistoryLimits {
    /// Limits of `events` per lock and `retention`; refused (a usage
    /// error) out of range: more than [`MAX_HISTORY_EVENTS`], a retention
    /// under 1s or over [`MAX_HISTORY_RETENTION`].
    pub fn new(events: u32, retention: Duration) -> Result<HistoryLimits> {
        if events > MAX_HISTORY_EVENTS {
            return Err(Error::Invalid(msg![
                Setting::HistoryEvents,
                format!(" {events} is too many: at most {MAX_HISTORY_EVENTS}")
            ]));
        }
        if retention < Duration::from_secs(1) || retention > MAX_HISTORY_RETENTION {
            return Err(Error::Invalid(msg![
                Setting::HistoryRetention,
                format!(" {} is out of range: use 1s to 366d", human(retention))
            ]));
        }
        Ok(HistoryLimits { events, retention })
    }

    /// Events kept per lock (about; 0: none, counters only).
    pub fn events(&self) -> u32 {
        self.events
    }

    /// How long a lock's history and counters outlive its last event.
    pub fn retention(&self) -> Duration {
        self.retention
    }

    /// The scripts' last two ARGV (lua/common.lua).
    pub(crate) fn args(&self) -> [String; 2] {
        [
            self.events.to_string(),
            crate::duration::millis(self.retention).to_string(),
        ]
    }
}

/// How a hold ended, for the history (see [`Release::note`](super::Release::note)):
/// by default a plain release.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReleaseNote {
    /// The exit code of the command run under the lock (exec).
    pub exit_code: Option<i32>,
    /// The holder was stopped for holding longer than allowed
    /// (`--max-hold`): the history says `overran` (counted in `overruns`)
    /// instead of `released`.
    pub overran: bool,
}

/// A holder's word that its lock is gone, for the history (a `lost`
/// event: see [`crate::Backend::record_lost`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loss {
    /// Who held it, as the grant stored it.
    pub info: HolderInfo,
    /// Why the holder counts it as lost.
    pub reason: String,
}

/// One event in a lock's history (see [`crate::Locker::history`]).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Event {
    /// granted, released, expired, lost, timeout, superseded, broken or
    /// overran.
    pub event: String,
    /// When (server clock, ms since 1970).
    pub at: u64,
    /// Who: the holder (or the waiter, for timeout and superseded), as it
    /// stored itself; None if not recorded.
    pub holder: Option<HolderInfo>,
    /// The grant's fencing value, where one applies.
    pub fence: Option<u64>,
    /// granted: how long the holder had waited.
    pub waited_ms: Option<u64>,
    /// released, overran, expired (when known): how long it was held.
    pub held_ms: Option<u64>,
    /// released: the exit code of exec's command.
    pub exit_code: Option<i32>,
    /// broken: user@host of the breaker; superseded: of the newer waiter.
    pub by: Option<String>,
    /// lost, broken: why.
    pub reason: Option<String>,
}

impl super::Node {
    /// [`super::Backend::histories`] on one server or a cluster: one
    /// lua/history.lua call per lock, all through `Node::batch` (pipelined;
    /// on a cluster the masters answer their shares at the same time).
    pub(super) fn histories_of(
        &mut self,
        keys: &[String],
        limit: usize,
    ) -> Result<Vec<Vec<Event>>> {
        use super::Backend;
        let [cap, retention] = self.history.args();
        let count = limit.to_string();
        let cmds: Vec<redis::Cmd> = keys
            .iter()
            .map(|k| {
                let lock = self.name(k)?;
                let keys = lock.keys(None);
                let mut c = self.script_cmd(&super::script::HISTORY);
                c.arg(keys.len())
                    .arg(keys)
                    .arg(&count)
                    .arg(&cap)
                    .arg(&retention);
                Ok(c)
            })
            .collect::<Result<_>>()?;
        let replies = self
            .batch(&cmds)
            .map_err(|e| self.batch_failed(e, "history".into()))?;
        keys.iter()
            .zip(replies)
            .map(|(k, reply)| match reply {
                Ok(v) => self.settled(k, limit, v),
                // The script went (a restart, SCRIPT FLUSH): this one again
                // through `Node::eval`, whose EVAL loads it for the rest
                // (or which sends EVALSHA where EVALSHA_RO is unknown).
                Err(e) if super::node::retry_alone(&e) => self.history(k, limit),
                Err(e) => Err(self.fail(e, format!("history {k:?}"))),
            })
            .collect()
    }

    /// The events of lock `key` from lua/history.lua's `reply` (which
    /// writes nothing). Where it found leases that ran out unnoticed, and
    /// the user may write, lua/settle.lua records them (prune and settle in
    /// lua/common.lua, as an acquire's slow path does) and its reply is the
    /// answer: each is recorded once, at the first read or acquire that
    /// finds it. A user Redis refuses the write (NOPERM: a monitor user)
    /// gets the entries history.lua computed, the same but for their time
    /// (the read's), and leaves them to the next writer.
    pub(super) fn settled(
        &mut self,
        key: &str,
        limit: usize,
        reply: redis::Value,
    ) -> Result<Vec<Event>> {
        use super::Backend;
        let (unsettled, events) = super::decode::history_read(reply)?;
        if unsettled == 0 || self.read_only {
            return Ok(events);
        }
        let lock = self.name(key)?;
        let [cap, retention] = self.history.args();
        let res: Result<redis::Value> = self.eval(
            &super::script::SETTLE,
            &lock.keys(None),
            &[&limit.to_string(), &cap, &retention],
            || format!("history {key:?}"),
            super::script::RESEND_WINDOW,
        );
        self.note_refused(&res);
        match res {
            Ok(v) => super::decode::history(v),
            Err(_) if self.read_only => Ok(events),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_limits_are_checked() {
        let d = HistoryLimits::default();
        assert_eq!(HistoryLimits::new(d.events(), d.retention()).unwrap(), d);
        let new = |events, secs| HistoryLimits::new(events, Duration::from_secs(secs));
        let ok = new(0, 1).unwrap();
        assert_eq!((ok.events(), ok.retention()), (0, Duration::from_secs(1)));
        assert!(new(MAX_HISTORY_EVENTS, 366 * 86_400).is_ok());
        assert_eq!(
            new(MAX_HISTORY_EVENTS + 1, 60).unwrap_err().to_string(),
            "HistoryLimits::events 100001 is too many: at most 100000"
        );
        assert_eq!(
            new(1, 0).unwrap_err().to_string(),
            "HistoryLimits::retention 0ms is out of range: use 1s to 366d"
        );
        assert!(new(1, 367 * 86_400).is_err());
    }
}
