//! The Redis keys of one lock (their layout: lua/common.lua).

use super::Token;
use crate::{Error, Result};

/// Longest key name accepted, in bytes.
pub const MAX_KEY_LEN: usize = 512;

/// A lock name checked and placed under a prefix, with its Redis keys.
#[derive(Clone, Debug)]
pub struct LockName {
    name: String,
    base: String,
    /// The prefix's length in `base`.
    prefix_len: usize,
}

impl LockName {
    /// Check `name` (not empty, not too long) and place it under `prefix`.
    pub fn new(prefix: &str, name: &str) -> Result<LockName> {
        if name.is_empty() {
            return Err(Error::invalid("lock key must not be empty"));
        }
        if name.len() > MAX_KEY_LEN {
            return Err(Error::invalid(format!(
                "lock key is {} bytes; at most {MAX_KEY_LEN} allowed",
                name.len()
            )));
        }
        if name.chars().any(char::is_control) {
            return Err(Error::invalid(format!(
                "lock key {name:?} contains control characters"
            )));
        }
        if prefix.chars().any(char::is_control) {
            return Err(Error::invalid(format!(
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
            return Err(Error::invalid(format!(
                "lock key {name:?} under prefix {prefix:?} makes an empty hash tag \
                 (\"{{}}\"); do not start the key with '}}' or put \"{{}}\" in the prefix"
            )));
        }
        Ok(LockName {
            name: name.to_string(),
            base,
            prefix_len: prefix.len(),
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

    /// The lock's history, a list of events (lua/common.lua).
    pub fn log_key(&self) -> String {
        format!("{}:log", self.base)
    }

    /// The lock's event counters, a hash (lua/common.lua).
    pub fn stats_key(&self) -> String {
        format!("{}:n", self.base)
    }

    /// The break notices of the lock's broken holds, a hash (lua/break.lua).
    pub(super) fn notice_key(&self) -> String {
        format!("{}:b", self.base)
    }

    /// The keys of a renewal or a break: [`LockName::keys`] and the
    /// notices (lua/renew.lua, lua/break.lua).
    pub(super) fn noticed_keys(&self) -> Vec<String> {
        let mut keys = self.keys(None);
        keys.push(self.notice_key());
        keys
    }

    /// The break's permission key `<prefix>!{<name>}`: only lua/break.lua
    /// declares it, and nothing is ever stored there. It shares the lock's
    /// hash tag (one Cluster slot) but not its keys' pattern, so Redis,
    /// which checks a script call's keys against the caller's ACL, refuses
    /// a break to `~<prefix>{*` and allows it to a user that adds
    /// `~<prefix>!{*` (the roles of docs/deployments.md).
    pub(crate) fn break_permission_key(&self) -> String {
        let (prefix, tagged) = self.base.split_at(self.prefix_len);
        format!("{prefix}!{tagged}")
    }

    /// The keys of a break: [`LockName::noticed_keys`] and the permission
    /// key (lua/break.lua).
    pub(super) fn break_keys(&self) -> Vec<String> {
        let mut keys = self.noticed_keys();
        keys.push(self.break_permission_key());
        keys
    }

    /// The keys of a release by `token` with request id `req`:
    /// [`LockName::request_keys`] and the notices (lua/release.lua).
    pub(super) fn release_keys(&self, token: &Token, req: &str) -> Vec<String> {
        let mut keys = self.request_keys(token, req);
        keys.push(self.notice_key());
        keys
    }

    /// Where a keeper records a loss (src/keep/keeper.rs; `status` shows it).
    pub(crate) fn lost_key(&self) -> String {
        format!("{}:lost", self.base)
    }

    /// Who waits under RedLock, a hash of waiter ids written by
    /// lua/redlock_wait.lua (`status`, `list` and `top` read it).
    pub(crate) fn waiters_key(&self) -> String {
        format!("{}:rw", self.base)
    }

    /// The keys of a read of the lock's state by lua/status.lua:
    /// [`LockName::keys`], the keeper's loss record and RedLock's waiters.
    pub(super) fn status_keys(&self) -> Vec<String> {
        let mut keys = self.keys(None);
        keys.push(self.lost_key());
        keys.push(self.waiters_key());
        keys
    }

    /// The keys of one lock in lua/overview.lua: [`LockName::keys`] and
    /// RedLock's waiters.
    pub(super) fn overview_keys(&self) -> Vec<String> {
        let mut keys = self.keys(None);
        keys.push(self.waiters_key());
        keys
    }

    /// The keys of one lock in lua/overview.lua's list mode (`list`):
    /// [`LockName::overview_keys`] and the keeper's loss record.
    pub(super) fn list_keys(&self) -> Vec<String> {
        let mut keys = self.overview_keys();
        keys.push(self.lost_key());
        keys
    }

    /// The wake-up list of the waiter with token `token`.
    pub(super) fn wake_key_of(&self, token: &str) -> String {
        format!("{}:w:{token}", self.base)
    }

    /// The shard of the index of locks in use that holds this lock's entry
    /// (see [`INDEX_SHARDS`]).
    pub(crate) fn index_key(&self) -> String {
        index_shard_key(&self.base[..self.prefix_len], shard_of(slot(&self.base)))
    }

    /// The shard of the list of locks with history that holds this
    /// lock's entry: [`LockName::index_key`]'s shard, same slot
    /// (lua/index.lua writes both).
    pub(crate) fn known_key(&self) -> String {
        known_shard_key(&self.base[..self.prefix_len], shard_of(slot(&self.base)))
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

/// The index of locks in use (lua/index.lua; docs/internals.md, "The index
/// of locks in use") is split into this many shards, each a ZSET under the
/// prefix with a hash tag of its own: shard `i`'s tag hashes to a Redis
/// Cluster slot in the `i`-th 1/64 of the slot range, and a lock's entry
/// goes to the shard whose range holds the lock's own slot. So on a
/// cluster the index writes spread over the masters exactly as the locks
/// do (a master serving a range of slots serves the shards of that
/// range), and no key is written by every acquire. `list` reads all 64.
pub(crate) const INDEX_SHARDS: usize = 64;

/// Redis Cluster's slot count.
const SLOTS: u16 = 16384;

/// CRC16/XMODEM, Redis Cluster's key hash.
const fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    let mut i = 0;
    while i < bytes.len() {
        crc ^= (bytes[i] as u16) << 8;
        let mut b = 0;
        while b < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            b += 1;
        }
        i += 1;
    }
    crc
}

/// The Redis Cluster slot of `key`: of its hash tag (what lies between
/// its first '{' and the next '}', if not empty), else of the whole key.
pub(crate) fn slot(key: &str) -> u16 {
    let b = key.as_bytes();
    let tag = b
        .iter()
        .position(|&c| c == b'{')
        .and_then(|open| {
            let close = b[open + 1..].iter().position(|&c| c == b'}')?;
            (close > 0).then(|| &b[open + 1..open + 1 + close])
        })
        .unwrap_or(b);
    crc16(tag) % SLOTS
}

/// The shard whose slot range holds `slot`.
fn shard_of(slot: u16) -> usize {
    usize::from(slot) * INDEX_SHARDS / usize::from(SLOTS)
}

/// The decimal digits of `n` as a hash tag `i<n>`, and its slot.
const fn tag_slot(n: u32) -> u16 {
    let mut buf = [0u8; 12];
    buf[0] = b'i';
    let mut digits = [0u8; 10];
    let (mut len, mut m) = (0, n);
    loop {
        digits[len] = b'0' + (m % 10) as u8;
        len += 1;
        m /= 10;
        if m == 0 {
            break;
        }
    }
    let mut i = 0;
    while i < len {
        buf[1 + i] = digits[len - 1 - i];
        i += 1;
    }
    let (tag, _) = buf.split_at(1 + len);
    crc16(tag) % SLOTS
}

/// Shard `i`'s tag is `i<n>` with `n` the least number whose tag hashes
/// into shard `i`'s slot range: computed at compile time, fixed for good
/// (every rlock of a deployment must name the same keys).
const SHARD_TAGS: [u32; INDEX_SHARDS] = {
    let mut tags = [0u32; INDEX_SHARDS];
    let mut i = 0;
    while i < INDEX_SHARDS {
        let mut n = 0;
        while (tag_slot(n) as usize) * INDEX_SHARDS / (SLOTS as usize) != i {
            n += 1;
        }
        tags[i] = n;
        i += 1;
    }
    tags
};

/// Shard `shard` of the index of locks under `prefix`.
pub(crate) fn index_shard_key(prefix: &str, shard: usize) -> String {
    format!("{prefix}{{i{}}}:index", SHARD_TAGS[shard])
}

/// Shard `shard` of the list of locks with history under `prefix`
/// (lua/index.lua): the index shard's hash tag, so the same slot.
pub(crate) fn known_shard_key(prefix: &str, shard: usize) -> String {
    format!("{prefix}{{i{}}}:known", SHARD_TAGS[shard])
}

/// Every shard of the list of locks with history under `prefix`.
pub(crate) fn known_shard_keys(prefix: &str) -> Vec<String> {
    (0..INDEX_SHARDS)
        .map(|i| known_shard_key(prefix, i))
        .collect()
}

/// Every shard of the index of locks under `prefix`.
pub(crate) fn index_shard_keys(prefix: &str) -> Vec<String> {
    (0..INDEX_SHARDS)
        .map(|i| index_shard_key(prefix, i))
        .collect()
}

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
        for k in l.release_keys(&tok, "r").into_iter().chain(l.break_keys()) {
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
    fn only_the_break_permission_key_is_outside_the_job_pattern() {
        // The job role's ACL pattern is `~rlock:{*` (docs/deployments.md).
        let l = LockName::new("rlock:", "deploy").unwrap();
        let tok = Token::generate();
        assert_eq!(l.break_permission_key(), "rlock:!{deploy}");
        assert_eq!(slot(&l.break_permission_key()), slot(l.redis_key()));
        let mut all = l.release_keys(&tok, "r");
        all.extend(l.noticed_keys());
        all.push(l.lost_key());
        all.push(l.waiters_key());
        all.push(l.index_key());
        all.push(l.known_key());
        for k in all {
            assert!(k.starts_with("rlock:{"), "{k}");
        }
        assert!(!l.break_permission_key().starts_with("rlock:{"));
    }

    #[test]
    fn index_shards_cover_the_slot_range() {
        // Known slots (CLUSTER KEYSLOT): "foo" 12182, "{user1000}.following"
        // and "{user1000}.followers" alike, an empty tag hashes the key.
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("{user1000}.following"), slot("user1000"));
        assert_eq!(slot("foo{}{bar}"), crc16(b"foo{}{bar}") % 16384);
        assert_eq!(slot("a{b}c{d}"), slot("b"));
        for (i, key) in index_shard_keys("rlock:").iter().enumerate() {
            assert_eq!(shard_of(slot(key)), i, "{key}");
        }
        // A lock's entry is in the shard of its own slot range, under the
        // lock's prefix; a prefix with a hash tag puts every lock and every
        // shard in that tag's slot.
        let l = LockName::new("rlock:", "deploy").unwrap();
        assert_eq!(
            shard_of(slot(&l.index_key())),
            shard_of(slot(l.redis_key()))
        );
        assert!(l.index_key().starts_with("rlock:{i"));
        let t = LockName::new("p{t}:", "x").unwrap();
        assert_eq!(slot(&t.index_key()), slot("t"));
        assert_eq!(slot(&l.known_key()), slot(&l.index_key()));
        assert!(l.known_key().ends_with(":known"));
    }

    #[test]
    fn glob_escaping() {
        assert_eq!(escape_glob("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
    }
}
