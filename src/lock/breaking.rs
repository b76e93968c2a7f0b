//! Breaking a lock (`rlock break`): an operator ends holds by force
//! (lua/break.lua). What a break targets, what it did, how a holder is
//! named, and the notice a broken holder's renewal reads.

use super::{HolderStatus, Status};
use crate::{Error, Result};

/// Which holds a [`Break`] ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holders {
    /// Every hold of the lock (every holder of a semaphore or read-write
    /// lock), parked min-holds included.
    All,
    /// The holds granted with these fences (a fence names one grant: see
    /// [`matching`]). Fences that hold nothing any more are skipped.
    Fences(Vec<u64>),
}

/// An operator's break (see [`crate::Backend::break_lock`]): whose holds,
/// by whom (user@host: [`operator`]), and why; `by` and `reason` are
/// checked (as [`check`]) when it is made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Break {
    holders: Holders,
    by: String,
    reason: String,
}

impl Break {
    /// A break of `holders` by `by` for `reason`, once both are checked.
    pub fn new(holders: Holders, by: &str, reason: &str) -> Result<Break> {
        check(by, reason)?;
        Ok(Break {
            holders,
            by: by.to_string(),
            reason: reason.to_string(),
        })
    }

    /// The same break, of other holders.
    pub fn of(&self, holders: Holders) -> Break {
        Break {
            holders,
            ..self.clone()
        }
    }

    /// Whose holds it ends.
    pub fn holders(&self) -> &Holders {
        &self.holders
    }

    /// Who breaks them.
    pub fn by(&self) -> &str {
        &self.by
    }

    /// Why.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// What a break did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Broken {
    /// The fences of the holds that were ended (empty: nothing matched, or
    /// the lock was free).
    pub fences: Vec<u64>,
    /// How many waiters were told they may now take the lock.
    pub woken: usize,
}

/// Longest `reason` accepted, in bytes.
pub const MAX_REASON_LEN: usize = 1000;

/// What a refused break says ([`Error::NoPermission`]'s `what`): Redis
/// refused break.lua's call because the user's ACL does not cover the
/// break permission key (the job role; [`crate::lock::LockName`]'s keys).
pub const MAY_NOT_BREAK: &str = "this Redis user may not break locks";

/// What a refused break needs.
pub(crate) const BREAK_NEEDS: &str = "break needs the operator role, see docs/deployments.md#roles";

/// A break's refusal by the ACL, said as such (other errors unchanged).
pub(crate) fn refused(e: Error) -> Error {
    match e {
        Error::NoPermission { refused, .. } => Error::NoPermission {
            what: MAY_NOT_BREAK.to_string(),
            refused,
            needs: Some(BREAK_NEEDS.to_string()),
        },
        e => e,
    }
}

/// How a broken holder's loss starts (`Error::Lost`'s `why`), so that exec
/// and the keeper can tell it from other losses.
pub(crate) const BROKEN_BY: &str = "it was broken by ";

/// Check a break's `by` and `reason`: not empty, one line, bounded.
pub fn check(by: &str, reason: &str) -> Result<()> {
    for (what, s) in [("reason", reason), ("breaker (by)", by)] {
        if s.trim().is_empty() {
            return Err(Error::invalid(format!(
                "the {what} of a break must not be empty"
            )));
        }
        if s.len() > MAX_REASON_LEN {
            return Err(Error::invalid(format!(
                "the {what} of a break is {} bytes; at most {MAX_REASON_LEN} allowed",
                s.len()
            )));
        }
        if s.chars().any(char::is_control) {
            return Err(Error::invalid(format!(
                "the {what} of a break {s:?} contains control characters"
            )));
        }
    }
    Ok(())
}

/// The operator breaking a lock: `user@host` (the login name: $USER,
/// $LOGNAME, else the user database's name for the uid; else the uid).
pub fn operator() -> String {
    let mut user = super::login_name();
    if user.is_empty() {
        // SAFETY: getuid cannot fail.
        user = unsafe { libc::getuid() }.to_string();
    }
    format!("{user}@{}", super::hostname())
}

/// The holders of `status` that `id` names: `id` is a holder's fence, as
/// `rlock status` and `list` print it (`fence 7`: "7"; unique, since each
/// grant of a lock gets a new fence), or `PID@HOST` (every hold of that
/// process). An `id` of neither form is [`Error::Invalid`]; one that matches
/// nobody gives an empty list.
pub fn matching<'s>(status: &'s Status, id: &str) -> Result<Vec<&'s HolderStatus>> {
    let id = id.trim();
    if let Ok(fence) = id.parse::<u64>() {
        return Ok(status.holders.iter().filter(|h| h.fence == fence).collect());
    }
    if let Some((pid, host)) = id.split_once('@')
        && let Ok(pid) = pid.parse::<u32>()
        && !host.is_empty()
    {
        return Ok(status
            .holders
            .iter()
            .filter(|h| h.pid == pid && h.host == host)
            .collect());
    }
    Err(Error::invalid(format!(
        "holder {id:?} is neither a fence (a number, as status shows it: `fence 7`) nor PID@HOST"
    )))
}

/// The loss a renewal reports for a broken hold: who broke it and why,
/// from the notice break.lua left (JSON {by, reason}).
pub(crate) fn lost_why(notice: &str) -> String {
    #[derive(serde::Deserialize)]
    struct Notice {
        by: String,
        reason: String,
    }
    match serde_json::from_str::<Notice>(notice) {
        Ok(n) => format!("{BROKEN_BY}{} (reason: {})", n.by, n.reason),
        Err(_) => format!("{BROKEN_BY}an operator (rlock break)"),
    }
}

/// Who broke a hold and why, from a loss's `why` as `lost_why` words it
/// (None: not a break, or one whose notice named nobody).
pub fn breaker(why: &str) -> Option<(&str, &str)> {
    let (by, reason) = why.strip_prefix(BROKEN_BY)?.split_once(" (reason: ")?;
    Some((by, reason.strip_suffix(')')?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(fence: u64, pid: u32, host: &str) -> HolderStatus {
        HolderStatus {
            mode: "read".into(),
            host: host.into(),
            pid,
            ttl_ms: 1000,
            count: 1,
            fence,
            ..HolderStatus::default()
        }
    }

    #[test]
    fn a_holder_is_named_by_its_fence_or_pid_at_host() {
        let st = Status {
            key: "k".into(),
            kind: "rw".into(),
            held: true,
            fence: 9,
            holders: vec![holder(7, 10, "a"), holder(9, 11, "b")],
            ..Status::default()
        };
        assert_eq!(matching(&st, "9").unwrap()[0].pid, 11);
        assert_eq!(matching(&st, "10@a").unwrap()[0].fence, 7);
        assert!(matching(&st, "8").unwrap().is_empty());
        assert!(matching(&st, "10@b").unwrap().is_empty());
        assert!(matching(&st, "x").is_err());
        assert!(matching(&st, "10@").is_err());
    }

    #[test]
    fn a_refused_break_names_the_operator_role() {
        let e = refused(Error::NoPermission {
            what: "break \"k\" on Redis at h:1: refused by this Redis user's ACL".into(),
            refused: "NOPERM no permissions to access a key".into(),
            needs: None,
        });
        assert_eq!(
            e.to_string(),
            "this Redis user may not break locks (NOPERM no permissions to access a key): \
             break needs the operator role, see docs/deployments.md#roles"
        );
        assert!(matches!(refused(Error::invalid("x")), Error::Invalid(_)));
    }

    #[test]
    fn notices_say_who_and_why() {
        let why = lost_why(r#"{"by":"ann@h","reason":"hung deploy"}"#);
        assert_eq!(why, "it was broken by ann@h (reason: hung deploy)");
        assert!(lost_why("?").starts_with(BROKEN_BY));
    }

    #[test]
    fn reasons_are_checked() {
        assert!(check("a@h", "why").is_ok());
        assert!(check("a@h", " ").is_err());
        assert!(check("a@h", "a\nb").is_err());
        assert!(check("a@h", &"x".repeat(MAX_REASON_LEN + 1)).is_err());
    }

    #[test]
    fn a_break_is_made_checked_and_keeps_its_terms_for_other_holders() {
        assert!(Break::new(Holders::All, "", "why").is_err());
        assert!(Break::new(Holders::All, "a@h", "a\tb").is_err());
        let order = Break::new(Holders::All, "a@h", "why").unwrap();
        let some = order.of(Holders::Fences(vec![3]));
        assert_eq!(some.holders(), &Holders::Fences(vec![3]));
        assert_eq!((some.by(), some.reason()), ("a@h", "why"));
    }
}
