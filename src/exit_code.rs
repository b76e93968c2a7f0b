//! Exit codes of the `rlock` binary. They follow sysexits(3) where one fits;
//! the table is repeated in docs/guide.md and the man page.

use crate::Error;

/// Success.
pub const OK: u8 = 0;
/// Bad usage or input: flags, durations, keys, tokens, URLs, a key holding
/// foreign data, a --limit that differs from the lock's (EX_USAGE).
pub const USAGE: u8 = 64;
/// Redis unreachable, not answering in time, or refusing us (EX_UNAVAILABLE).
pub const UNAVAILABLE: u8 = 69;
/// Unexpected reply from Redis (a bug or an incompatible server), or output
/// that cannot be written (EX_SOFTWARE).
pub const INTERNAL: u8 = 70;
/// Busy (--no-wait), the wait timed out, or a newer --supersede waiter
/// replaced this one (EX_TEMPFAIL, flock's default -E).
pub const BUSY: u8 = 75;
/// The token does not own this lock, or the Redis user's ACL refused
/// what was asked (NOPERM: a `break` by a user without the operator role)
/// (EX_NOPERM).
pub const NOT_OWNER: u8 = 77;
/// doctor: something unsafe was found in the Redis deployment
/// (EX_CONFIG).
pub const UNSAFE: u8 = 78;
/// The lock was lost: expired or deleted while held.
pub const LOST: u8 = 79;
/// exec, rw, `acquire --keep`: the command ran past `--max-hold` and was
/// stopped (as timeout(1) exits).
pub const OVERRAN: u8 = 124;
/// exec: the command was found but could not be run.
pub const CANNOT_EXECUTE: u8 = 126;
/// exec: the command was not found.
pub const NOT_FOUND: u8 = 127;

/// Exit code for a process that died of signal `sig`, as shells report it.
pub fn for_signal(sig: i32) -> u8 {
    // 129..=255 after the clamp: the fallback cannot happen.
    u8::try_from(128 + sig.clamp(1, 127)).unwrap_or(u8::MAX)
}

/// Exit code for a command's wait status: its own code, or 128+N if
/// signal N killed it; [`INTERNAL`] if the status is unknown.
pub fn for_status(status: Option<std::process::ExitStatus>) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match status.map(|st| (st.code(), st.signal())) {
        // On Unix, code() is WEXITSTATUS: 0..=255.
        Some((Some(c), _)) => u8::try_from(c).unwrap_or(INTERNAL),
        Some((None, Some(sig))) => for_signal(sig),
        _ => INTERNAL,
    }
}

/// Exit code for an error; `conflict` is the -E value used for busy/timeout.
pub fn for_error(err: &Error, conflict: u8) -> u8 {
    match err {
        Error::Invalid(_)
        | Error::Conflict(_)
        | Error::OtherLimit { .. }
        | Error::OtherKind { .. } => USAGE,
        Error::Unavailable { .. } => UNAVAILABLE,
        Error::Protocol(_) | Error::NotRedis { .. } => INTERNAL,
        Error::Busy { .. } | Error::Timeout { .. } | Error::Superseded { .. } => conflict,
        Error::NotOwner { .. } | Error::NoPermission { .. } => NOT_OWNER,
        Error::Lost { .. } => LOST,
        Error::Interrupted(sig) => for_signal(*sig),
        Error::Spawn { code, .. } => *code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_map_to_128_plus_n() {
        assert_eq!(for_signal(libc::SIGINT), 130);
        assert_eq!(for_signal(libc::SIGKILL), 137);
        assert_eq!(for_signal(libc::SIGTERM), 143);
    }

    #[test]
    fn statuses_map_to_their_code_or_128_plus_n() {
        use std::os::unix::process::ExitStatusExt;
        use std::process::ExitStatus;
        assert_eq!(for_status(Some(ExitStatus::from_raw(0))), 0);
        assert_eq!(for_status(Some(ExitStatus::from_raw(42 << 8))), 42);
        assert_eq!(for_status(Some(ExitStatus::from_raw(255 << 8))), 255);
        assert_eq!(for_status(Some(ExitStatus::from_raw(libc::SIGKILL))), 137);
        assert_eq!(for_status(Some(ExitStatus::from_raw(libc::SIGTERM))), 143);
        assert_eq!(for_status(None), INTERNAL);
    }

    #[test]
    fn busy_uses_the_conflict_code() {
        let busy = Error::Busy {
            key: "k".into(),
            holder: None,
        };
        assert_eq!(for_error(&busy, BUSY), 75);
        assert_eq!(for_error(&busy, 0), 0);
        assert_eq!(for_error(&Error::invalid("x"), 0), USAGE);
        assert_eq!(for_error(&Error::NotOwner { key: "k".into() }, 0), 77);
        let refused = Error::NoPermission {
            what: "break".into(),
            refused: "NOPERM".into(),
            needs: None,
        };
        assert_eq!(for_error(&refused, 0), 77);
        assert_eq!(
            for_error(
                &Error::Lost {
                    key: "k".into(),
                    why: "gone".into()
                },
                0
            ),
            79
        );
    }

    #[test]
    fn codes_are_distinct() {
        let mut all = [
            OK,
            USAGE,
            UNAVAILABLE,
            INTERNAL,
            BUSY,
            NOT_OWNER,
            UNSAFE,
            LOST,
            OVERRAN,
            CANNOT_EXECUTE,
            NOT_FOUND,
        ];
        all.sort();
        assert!(all.windows(2).all(|w| w[0] != w[1]));
    }
}
