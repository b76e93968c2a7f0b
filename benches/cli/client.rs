//! rlock pointed at a bench server: the library's `Locker` and the
//! bench's own `rlock` binary.

use std::process::{Command, Stdio};
use std::time::Duration;

use rlock::{ConnectOptions, Locker, Request, Wait};

use crate::support::Redis;
use crate::{PREFIX, RLOCK};

pub(crate) fn options(url: String) -> ConnectOptions {
    ConnectOptions {
        urls: vec![url],
        ..Default::default()
    }
}

pub(crate) fn locker(r: &Redis) -> Locker {
    Locker::connect(&options(r.url()), PREFIX).expect("connect locker")
}

pub(crate) fn request(ttl: Duration) -> Request {
    Request::builder(ttl)
        .wait(Wait::Forever)
        .build()
        .expect("request")
}

/// Waiters queued on `key` right now (0 on error: the caller polls anyway).
pub(crate) fn waiters_of(l: &mut Locker, key: &str) -> u64 {
    l.status(key).map_or(0, |s| s.waiters)
}

/// The bench's own `rlock`, pointed at our server, with none of the
/// caller's RLOCK_* settings (a stray RLOCK_HELD would mean re-entry).
pub(crate) fn rlock(r: &Redis) -> Command {
    let mut c = Command::new(RLOCK);
    clean_env(&mut c);
    c.env("RLOCK_URL", r.url()).stdin(Stdio::null());
    c
}

/// None of the caller's RLOCK_*, ETCD_* or ETCDCTL_* settings (etcd and
/// etcdctl read their flags from the environment too), and etcdctl speaks
/// API v3 (the default only since 3.4).
pub(crate) fn clean_env(c: &mut Command) {
    for (k, _) in std::env::vars_os() {
        let s = k.to_string_lossy();
        if ["RLOCK_", "ETCD_", "ETCDCTL_"]
            .iter()
            .any(|p| s.starts_with(p))
        {
            c.env_remove(k);
        }
    }
    c.env("ETCDCTL_API", "3");
}
