//! The Redis keys of one lock (their layout: lua/common.lua).

use super::types::Token;
use crate::{Error, Result};

/// Longest key name accepted, in bytes.
pub const MAX_KEY_LEN: usize = 512;

/// A lock name checked and placed under a prefix, with its Redis keys.
#[derive(Clone, Debug)]
pub struct LockName {
    name: String,
    base: String,
}

impl LockName {
    /// Check `name` (not empty, not too long) and place it under `prefix`.
    pub fn new(prefix: &str, name: &str) -> Result<LockName> {
        if name.is_empty() {
            return Err(Error::Usage("lock key must not be empty".into()));
        }
        if name.len() > MAX_KEY_LEN {
            return Err(Error::Usage(format!(
                "lock key is {} bytes; at most {MAX_KEY_LEN} allowed",
                name.len()
            )));
        }
        if name.chars().any(char::is_control) {
            return Err(Error::Usage(format!(
                "lock key {name:?} contains control characters"
            )));
        }
        if prefix.chars().any(char::is_control) {
            return Err(Error::Usage(format!(
                "prefix {prefix:?} contains control characters"
            )));
        }
        // The braces make {name} the hash tag of every key of this lock, so
        // all of them live in one Redis Cluster slot. If name itself holds a
        // '}', the tag ends there, which is still common to all the keys;
        // but an empty tag ("{}") means no tag, and keys in many slots.
        let base = format!("{prefix}{{{name}}}");
        let open = base.find('{').unwrap_or(0);
        if base[open..].starts_with("{}") {
            return Err(Error::Usage(format!(
                "lock key {name:?} under prefix {prefix:?} makes an empty hash tag \
                 (\"{{}}\"); do not start the key with '}}' or put \"{{}}\" in the prefix"
            )));
        }
        Ok(LockName {
            name: name.to_string(),
            base,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The main Redis key of the lock (a hash).
    pub fn redis_key(&self) -> &str {
        &self.base
    }

    pub(super) fn keys(&self, token: Option<&Token>) -> Vec<String> {
        let b = &self.base;
        let mut keys = vec![
            b.clone(),
            format!("{b}:h"),
            format!("{b}:q"),
            format!("{b}:qa"),
            format!("{b}:fence"),
            format!("{b}:qw"),
            self.log_key(),
            self.stats_key(),
        ];
        if let Some(t) = token {
            keys.push(self.wake_key(t));
        }
        keys
    }

    pub(super) fn wake_key(&self, token: &Token) -> String {
        self.wake_key_of(token.as_str())
    }

    /// The lock's history, a stream (lua/common.lua).
    pub fn log_key(&self) -> String {
        format!("{}:log", self.base)
    }

    /// The lock's event counters, a hash (lua/common.lua).
    pub fn stats_key(&self) -> String {
        format!("{}:n", self.base)
    }

    /// Where a keeper records a loss (src/keep.rs; `status` shows it).
    pub(crate) fn lost_key(&self) -> String {
        format!("{}:lost", self.base)
    }

    /// The wake-up list of the waiter with token `token`.
    pub(super) fn wake_key_of(&self, token: &str) -> String {
        format!("{}:w:{token}", self.base)
    }

    /// The keys of an acquire or release by `token` with request id `req`
    /// (the last one is the request's record, see lua/acquire.lua).
    pub(super) fn request_keys(&self, token: &Token, req: &str) -> Vec<String> {
        let mut keys = self.keys(Some(token));
        keys.push(format!("{}:r:{req}", self.base));
        keys
    }
}

/// How long a wake-up signal waits in a waiter's list (ms): a waiter
/// that misses it looks again at its next heartbeat anyway.
pub(crate) const WAKE_TTL_MS: u64 = 10_000;

/// A new request id: the same for every resend of one call.
pub(super) fn request_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

pub(super) fn escape_glob(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_share_one_hash_tag() {
        let l = LockName::new("rlock:", "a}b").unwrap();
        let tok = Token::generate();
        for k in l.keys(Some(&tok)) {
            let open = k.find('{').unwrap();
            let close = open + k[open..].find('}').unwrap();
            assert_eq!(&k[open + 1..close], "a", "{k}");
        }
        assert!(LockName::new("rlock:", "").is_err());
        assert!(LockName::new("rlock:", "a\nb").is_err());
        assert!(LockName::new("rlock:", "}x").is_err());
        assert!(LockName::new("p{}:", "x").is_err());
        assert!(LockName::new("p{t}:", "x").is_ok());
        assert!(LockName::new("rlock:", &"x".repeat(MAX_KEY_LEN + 1)).is_err());
    }

    #[test]
    fn glob_escaping() {
        assert_eq!(escape_glob("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
    }
}
