//! Re-entry: the RLOCK_HELD codec (which locks the enclosing `rlock exec`s
//! hold), and the token exec, acquire, release, renew and check act with.
//!
//! One `prefix{key}<TAB>token` line per lock, so a nested exec or acquire
//! of the same lock re-enters instead of waiting for its own parent; and
//! one `<TAB>token` line (no lock name) for a token the script exported in
//! RLOCK_TOKEN before an exec of another lock, which overwrote it for its
//! command (see `held_for_command`).

use crate::Token;
use crate::lock::LockName;

/// Environment variable listing the locks held by enclosing `rlock exec`s.
pub const HELD_ENV: &str = "RLOCK_HELD";

/// The token an enclosing `rlock exec` holds for `lock`, if any.
fn inherited_token(held: Option<&str>, lock: &LockName) -> Option<Token> {
    held?
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .find(|(name, _)| *name == lock.redis_key())
        .and_then(|(_, tok)| Token::parse(tok).ok())
}

/// The token to try re-entering `lock` with: the one an enclosing `rlock
/// exec` holds for it (`held`, RLOCK_HELD), else `exported` (RLOCK_TOKEN:
/// a script that exported the token of its `acquire --keep`) unless that
/// is an enclosing exec's own token, which RLOCK_HELD lists with the lock
/// it holds: it holds no other, and trying it would cost every nested
/// acquire of another lock a round trip for nothing.
pub fn reentry_token(held: Option<&str>, exported: Option<&str>, lock: &LockName) -> Option<Token> {
    inherited_token(held, lock)
        .or_else(|| {
            let tok = Token::parse(exported?).ok()?;
            (!listed(held, &tok)).then_some(tok)
        })
        .or_else(|| {
            // The script's own export, passed down past an enclosing exec
            // of another lock (its RLOCK_TOKEN is that exec's).
            held?
                .lines()
                .filter_map(|l| l.strip_prefix('\t'))
                .find_map(|t| Token::parse(t).ok())
        })
}

/// The token `release`, `renew` and `check` of `lock` act with, in this
/// order: `flag` (`--token`); the token `held` (RLOCK_HELD) records for
/// `lock`, inside an `rlock exec` of it at any depth; `exported`
/// (RLOCK_TOKEN) unless an enclosing exec set it for another lock; the
/// token the script exported, passed down in `held` past such an exec;
/// and `exported` after all. Inside `rlock exec deploy -- rlock exec db --
/// ...`, RLOCK_TOKEN is db's token, and `rlock check deploy` used it: it
/// said "another owner" (77) where a re-entering exec of deploy finds its
/// lock; the same order as [`reentry_token`] now, with RLOCK_TOKEN last.
pub fn owner_token(
    flag: Option<&str>,
    held: Option<&str>,
    exported: Option<&str>,
    lock: &LockName,
) -> crate::Result<Token> {
    if let Some(t) = flag {
        return Token::parse(t);
    }
    let exported = exported.filter(|t| !t.is_empty());
    if let Some(t) = reentry_token(held, exported, lock) {
        return Ok(t);
    }
    match exported {
        Some(t) => Token::parse(t),
        None => Err(crate::Error::Invalid(crate::msg![
            "no token: give ",
            crate::error::Setting::OwnerToken,
            " or set RLOCK_TOKEN (inside `rlock exec` of the lock, the key is enough)"
        ])),
    }
}

/// Is `tok` in `held`, with a lock name or as a passed-down export?
fn listed(held: Option<&str>, tok: &Token) -> bool {
    held.unwrap_or("")
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .any(|(_, t)| Token::parse(t).is_ok_and(|t| t == *tok))
}

/// The RLOCK_HELD for the command of an exec holding `lock` with `token`:
/// `held` with `lock` set to `token`, and `exported` (the RLOCK_TOKEN the
/// exec was started with, which its command's RLOCK_TOKEN replaces) kept
/// as a line of its own when it is neither that token nor listed already.
/// Without it, `export RLOCK_TOKEN=$(rlock acquire a --keep)` and then
/// `rlock exec b -- rlock exec a -- ...` waited for the script's own lock
/// for ever.
pub(crate) fn held_for_command(
    held: Option<&str>,
    lock: &LockName,
    token: &Token,
    exported: Option<&str>,
) -> String {
    let mut out = held_with(held, lock, token);
    if let Some(tok) = exported.and_then(|t| Token::parse(t).ok())
        && tok != *token
        && !listed(Some(&out), &tok)
    {
        out.push_str(&format!("\n\t{}", tok.as_str()));
    }
    out
}

/// `held` with `lock` (re)set to `token`.
pub(crate) fn held_with(held: Option<&str>, lock: &LockName, token: &Token) -> String {
    let mut out: Vec<String> = held
        .unwrap_or("")
        .lines()
        .filter(|l| {
            l.split_once('\t')
                .is_some_and(|(n, _)| n != lock.redis_key())
        })
        .map(str::to_string)
        .collect();
    out.push(format!("{}\t{}", lock.redis_key(), token.as_str()));
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_env_round_trip() {
        let a = LockName::new("rlock:", "a").unwrap();
        let b = LockName::new("rlock:", "b").unwrap();
        let (ta, tb) = (Token::generate(), Token::generate());
        let env = held_with(None, &a, &ta);
        let env = held_with(Some(&env), &b, &tb);
        assert_eq!(inherited_token(Some(&env), &a), Some(ta));
        assert_eq!(inherited_token(Some(&env), &b), Some(tb.clone()));
        let c = LockName::new("other:", "a").unwrap();
        assert_eq!(inherited_token(Some(&env), &c), None);
        // Re-adding a name replaces its entry.
        let env2 = held_with(Some(&env), &b, &tb);
        assert_eq!(env2.lines().count(), 2);
    }

    #[test]
    fn an_enclosing_execs_exported_token_is_not_tried_for_another_lock() {
        let a = LockName::new("rlock:", "a").unwrap();
        let b = LockName::new("rlock:", "b").unwrap();
        let (ta, kept) = (Token::generate(), Token::generate());
        let env = held_with(None, &a, &ta);
        // Inside `rlock exec a`: RLOCK_TOKEN is a's token.
        assert_eq!(
            reentry_token(Some(&env), Some(ta.as_str()), &a),
            Some(ta.clone())
        );
        assert_eq!(reentry_token(Some(&env), Some(ta.as_str()), &b), None);
        // A token the script exported (acquire --keep) is tried.
        assert_eq!(
            reentry_token(Some(&env), Some(kept.as_str()), &b),
            Some(kept.clone())
        );
        assert_eq!(reentry_token(None, Some(kept.as_str()), &b), Some(kept));
        assert_eq!(reentry_token(None, Some("not a token"), &b), None);
    }

    #[test]
    fn owner_token_prefers_the_flag_then_rlock_held_then_rlock_token() {
        let a = LockName::new("rlock:", "a").unwrap();
        let b = LockName::new("rlock:", "b").unwrap();
        let c = LockName::new("rlock:", "c").unwrap();
        let (ta, tb, flag) = (Token::generate(), Token::generate(), Token::generate());
        // Inside `rlock exec a -- rlock exec b -- ...`.
        let env = held_with(Some(&held_with(None, &a, &ta)), &b, &tb);
        let own = |f: Option<&str>, l: &LockName| owner_token(f, Some(&env), Some(tb.as_str()), l);
        assert_eq!(own(None, &a).unwrap(), ta);
        assert_eq!(own(None, &b).unwrap(), tb);
        assert_eq!(own(Some(flag.as_str()), &a).unwrap(), flag);
        assert!(own(Some("nope"), &a).is_err());
        // A lock no exec holds: RLOCK_TOKEN all the same (it holds
        // nothing there, and check says so).
        assert_eq!(own(None, &c).unwrap(), tb);
        // Outside any exec: RLOCK_TOKEN, or nothing.
        assert_eq!(owner_token(None, None, Some(tb.as_str()), &a).unwrap(), tb);
        assert!(owner_token(None, None, None, &a).is_err());
        assert!(owner_token(None, None, Some(""), &a).is_err());
        assert!(owner_token(None, None, Some("nope"), &a).is_err());
    }

    #[test]
    fn an_exported_token_passes_an_exec_of_another_lock() {
        let a = LockName::new("rlock:", "a").unwrap();
        let b = LockName::new("rlock:", "b").unwrap();
        let c = LockName::new("rlock:", "c").unwrap();
        let (kept, tb, tc) = (Token::generate(), Token::generate(), Token::generate());
        // The script exported a's token, then ran `rlock exec b`.
        let env = held_for_command(None, &b, &tb, Some(kept.as_str()));
        assert_eq!(env.lines().count(), 2);
        // Its command sees RLOCK_TOKEN = b's token: a is still re-entered.
        assert_eq!(
            reentry_token(Some(&env), Some(tb.as_str()), &a),
            Some(kept.clone())
        );
        assert_eq!(
            reentry_token(Some(&env), Some(tb.as_str()), &b),
            Some(tb.clone())
        );
        // One level deeper (`rlock exec c` in there): still one line for it.
        let env = held_for_command(Some(&env), &c, &tc, Some(tb.as_str()));
        assert_eq!(env.lines().count(), 3);
        assert_eq!(
            reentry_token(Some(&env), Some(tc.as_str()), &a),
            Some(kept.clone())
        );
        // An exec that re-entered with the export passes no extra line.
        let env = held_for_command(None, &a, &kept, Some(kept.as_str()));
        assert_eq!(env.lines().count(), 1);
        // Nothing exported: nothing extra.
        let env = held_for_command(None, &b, &tb, None);
        assert_eq!(reentry_token(Some(&env), Some(tb.as_str()), &a), None);
    }
}
