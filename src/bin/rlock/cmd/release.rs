//! `release` and `renew`: an owner acts on its lock.

use std::io::Write;
use std::time::Duration;

use rlock::{Released, exit_code};

use crate::cli::Global;
use crate::setup::{connect, owner_token};

/// `release KEY`: give back one hold, telling this host's keeper first.
pub(crate) fn release(
    g: &Global,
    key: &str,
    token: Option<&str>,
    min_hold: Option<Duration>,
) -> anyhow::Result<u8> {
    let token = owner_token(g, key, token)?;
    let mut locker = connect(g)?;
    let hold = min_hold.unwrap_or(Duration::ZERO);
    match rlock::keep::release(&mut locker, key, &token, false, Some(hold))? {
        Released::Released => {
            if g.verbose {
                say!("rlock: released {key:?}");
            }
        }
        Released::StillHeld(n) => {
            if !g.quiet {
                say!(
                    "rlock: {key:?} is still held by this token ({n} {} left)",
                    if n == 1 { "hold" } else { "holds" }
                );
            }
        }
        Released::NotHeld => {
            if !g.quiet {
                say!("rlock: {key:?} was not held (already released or expired); nothing to do");
            }
        }
    }
    Ok(exit_code::OK)
}

/// `renew KEY`: extend the lease (never shorten it).
pub(crate) fn renew(
    g: &Global,
    key: &str,
    token: Option<&str>,
    ttl: Duration,
) -> anyhow::Result<u8> {
    let token = owner_token(g, key, token)?;
    rlock::lock::check_ttl(ttl)?;
    let mut locker = connect(g)?;
    locker.renew(key, &token, ttl)?;
    if g.verbose {
        say!(
            "rlock: renewed {key:?} for at least {} (a renewal never shortens a lease)",
            rlock::duration::human(ttl)
        );
    }
    Ok(exit_code::OK)
}
