//! `break KEY --reason TEXT [--holder ID] [--yes]`: an operator ends a
//! stuck lock's hold(s) (the library's `Backend::break_lock`).

use std::io::{BufRead, IsTerminal, Write};

use rlock::HolderStatus;
use rlock::duration::human;
use rlock::exit_code;
use rlock::lock::breaking::{self, Break, Holders};

use crate::cli::Global;
use crate::setup::connect;

/// Exit code when nothing was broken because the operator said no, or
/// `--holder` named no holder.
const NOT_BROKEN: u8 = 1;

pub(crate) fn break_lock(
    g: &Global,
    key: &str,
    reason: &str,
    holder: Option<&str>,
    yes: bool,
) -> anyhow::Result<u8> {
    let by = breaking::operator();
    // Bad input first, before anything is sent.
    let order = Break::new(Holders::All, &by, reason)?;
    let ask = !yes;
    if ask && !std::io::stdin().is_terminal() {
        return Err(rlock::Error::invalid(format!(
            "stdin is not a terminal, so nobody can confirm: give --yes to break lock {key:?}"
        ))
        .into());
    }
    if let Some(id) = holder {
        // The form of the ID, against no holder at all.
        breaking::matching(&empty(key), id)?;
    }
    let mut locker = connect(g)?;
    let st = locker.status(key)?;
    if st.holders.is_empty() && !st.damaged.is_empty() {
        // Its keys deleted by hand: the remains go (lua/break.lua), asked
        // as for holders.
        if ask && !confirm_remains(key, &st.damaged) {
            say!("rlock: lock {key:?} not broken");
            return Ok(NOT_BROKEN);
        }
        let broken = locker.break_lock(key, &order)?;
        if !g.quiet {
            say!(
                "rlock: cleared the remains of damaged lock {key:?} ({}); {} hold(s) ended",
                st.damaged.join(", "),
                broken.fences.len()
            );
        }
        return Ok(exit_code::OK);
    }
    if st.holders.is_empty() {
        if !g.quiet {
            say!("rlock: lock {key:?} is not held: nothing to break");
        }
        return Ok(exit_code::OK);
    }
    let targets: Vec<&HolderStatus> = match holder {
        Some(id) => breaking::matching(&st, id)?,
        None => st.holders.iter().collect(),
    };
    if targets.is_empty() {
        say!(
            "rlock: no holder of lock {key:?} matches --holder {}; its holders: {}; nothing broken",
            holder.unwrap_or_default(),
            describe(&st.holders.iter().collect::<Vec<_>>())
        );
        return Ok(NOT_BROKEN);
    }
    if ask && !confirm(key, &targets) {
        say!("rlock: lock {key:?} not broken");
        return Ok(NOT_BROKEN);
    }
    // What was shown (and confirmed) is what is broken: should a holder
    // have changed meanwhile, the new one is left alone. With --yes and no
    // --holder, every hold there is.
    let which = if holder.is_none() && !ask {
        Holders::All
    } else {
        Holders::Fences(targets.iter().map(|h| h.fence).collect())
    };
    let broken = locker.break_lock(key, &order.of(which))?;
    if broken.fences.is_empty() {
        if !g.quiet {
            say!("rlock: lock {key:?} was released meanwhile: nothing to break");
        }
        return Ok(exit_code::OK);
    }
    if !g.quiet {
        let fences: Vec<String> = broken.fences.iter().map(u64::to_string).collect();
        // A hold whose holder may still run (count > 0) is marked, not
        // ended (lua/break.lua): the lock passes on once the holder has
        // stopped and released, or when its lease ends.
        let running: Vec<&&HolderStatus> = targets
            .iter()
            .filter(|h| h.count > 0 && broken.fences.contains(&h.fence))
            .collect();
        match running.iter().map(|h| h.ttl_ms).max() {
            Some(ttl) => say!(
                "rlock: breaking lock {key:?} (fence {}) as {by}: the holder stops what it runs \
                 at its next renewal and releases; the lock passes on then, at the latest when \
                 the lease ends (in {}); `rlock status {key}` shows it meanwhile",
                fences.join(", "),
                human(std::time::Duration::from_millis(ttl)),
            ),
            None => say!(
                "rlock: broke lock {key:?} (fence {}) as {by}; {} waiter(s) woken",
                fences.join(", "),
                broken.woken
            ),
        }
    }
    Ok(exit_code::OK)
}

/// Ask on the terminal; true for "y" or "yes".
fn confirm(key: &str, targets: &[&HolderStatus]) -> bool {
    let mut err = std::io::stderr();
    let _ = write!(
        err,
        "break lock {key:?} held by {}? [y/N] ",
        describe(targets)
    );
    let _ = err.flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// Ask on the terminal about a damaged lock's remains; true for yes.
fn confirm_remains(key: &str, remains: &[String]) -> bool {
    let mut err = std::io::stderr();
    let _ = write!(
        err,
        "lock {key:?} is damaged (left: {}); clear its remains? [y/N] ",
        remains.join(", ")
    );
    let _ = err.flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// "host H pid P (fence F, held 5m)" for each holder, as status shows them.
fn describe(holders: &[&HolderStatus]) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, rlock::duration::millis);
    holders
        .iter()
        .map(|h| {
            let held = std::time::Duration::from_millis(now.saturating_sub(h.since_ms));
            let cmd = h
                .cmd
                .as_deref()
                .map(|c| format!(", cmd {}", crate::escape::shown(c)))
                .unwrap_or_default();
            format!(
                "host {} pid {} (fence {}, held {}{cmd})",
                crate::escape::shown(&h.host),
                h.pid,
                h.fence,
                human(held)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A status with no holder, to check an ID's form before connecting.
fn empty(key: &str) -> rlock::Status {
    rlock::Status {
        key: key.into(),
        ..rlock::Status::default()
    }
}
