//! The commands that only look: `check`, `status`, `list`, `doctor`.

use std::io::Write;
use std::time::Duration;

use rlock::duration::human;
use rlock::exit_code;

use crate::cli::Global;
use crate::out::print;
use crate::render;
use crate::setup::{connect, connect_listing, options, owner_token};

/// `check KEY`: does the token hold it (0), no more (79), another owner (77)?
pub(crate) fn check(g: &Global, key: &str, token: Option<&str>, json: bool) -> anyhow::Result<u8> {
    let token = owner_token(g, key, token)?;
    let mut locker = connect(g)?;
    let held = locker.check(key, &token);
    let mut printed = Ok(());
    if json {
        let out = match &held {
            Ok(h) => {
                serde_json::json!({"held": true, "ttl_ms": rlock::duration::millis(h.ttl), "fence": h.fence})
            }
            // A break: who broke it and why (its mark or notice).
            Err(rlock::Error::Lost { why, .. }) => match rlock::lock::breaking::breaker(why) {
                Some((by, reason)) => {
                    serde_json::json!({"held": false, "why": "broken", "by": by, "reason": reason})
                }
                None => serde_json::json!({"held": false, "why": "gone"}),
            },
            Err(rlock::Error::NotOwner { .. }) => {
                serde_json::json!({"held": false, "why": "another owner"})
            }
            Err(_) => serde_json::Value::Null,
        };
        if !out.is_null() {
            printed = print(&format!("{out}\n"));
        }
    }
    // The lock's answer comes first: its exit code says more than
    // a closed stdout's.
    let held = held?;
    printed?;
    if g.verbose {
        say!(
            "rlock: {key:?} is held by this token for {} more (fence {})",
            human(held.ttl),
            held.fence
        );
    }
    Ok(exit_code::OK)
}

/// `status KEY`: who holds it, who waits.
pub(crate) fn status(g: &Global, key: &str, json: bool) -> anyhow::Result<u8> {
    let mut locker = connect(g)?;
    let st = locker.status(key)?;
    // A damaged lock is no error (its remains are taken or cleared as a
    // free lock's): a warning, and `damaged` in the JSON.
    if !st.damaged.is_empty() {
        say!(
            "rlock: warning: lock {key:?} is damaged: its keys were deleted by hand \
             (its state hash is gone; left: {}); its holds are gone, the next \
             acquire takes it, and `rlock break {key:?}` clears the remains",
            st.damaged.join(", ")
        );
    }
    if json {
        print(&(serde_json::to_string(&st)? + "\n"))?;
    } else {
        print(&render::status(&st))?;
    }
    Ok(exit_code::OK)
}

/// `doctor`: what in the deployment breaks locks.
pub(crate) fn doctor(
    g: &Global,
    ttl: Duration,
    role: Option<&str>,
    json: bool,
) -> anyhow::Result<u8> {
    rlock::lock::check_ttl(ttl)?;
    let role = role.map(str::parse::<rlock::doctor::Role>).transpose()?;
    let report = rlock::doctor::run_for(&options(g), &g.prefix, ttl, role)?;
    let out = if json {
        serde_json::to_string(&report)? + "\n"
    } else {
        report.render()
    };
    print(&out)?;
    Ok(if report.safe {
        exit_code::OK
    } else {
        exit_code::UNSAFE
    })
}

/// `list [PATTERN]`: every lock held or waited for.
pub(crate) fn list(g: &Global, pattern: &str, json: bool) -> anyhow::Result<u8> {
    let mut locker = connect_listing(g)?;
    let all = locker.list(pattern)?;
    if json {
        print(&(serde_json::to_string(&all)? + "\n"))?;
    } else {
        print(&all.iter().map(render::status).collect::<String>())?;
    }
    Ok(exit_code::OK)
}
