//! What a caller asks for: an owner token, a request (TTL, mode, slots,
//! wait, priority) and who asks, with the bounds a request is checked
//! against.

use std::fmt;
use std::time::Duration;

use super::history::ReleaseNote;
use crate::duration::human;
use crate::error::Setting;
use crate::{Error, Result, msg};

mod holder;

pub use holder::*;

/// Shortest lease TTL accepted.
pub const MIN_TTL: Duration = Duration::from_millis(50);
/// Longest lease TTL accepted.
pub const MAX_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// Highest [`RequestBuilder::priority`]; the lowest is its negative.
pub const MAX_PRIORITY: i32 = 1000;
/// An owner token: a UUIDv4, 122 random bits. Its Debug output hides it so
/// it cannot end up in logs by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// A fresh random token.
    pub fn generate() -> Token {
        Token(uuid::Uuid::new_v4().hyphenated().to_string())
    }

    /// Parse a token given by a user (flag or RLOCK_TOKEN).
    pub fn parse(s: &str) -> Result<Token> {
        let u = uuid::Uuid::try_parse(s.trim()).map_err(|_| {
            Error::invalid("malformed token: expected a UUID as printed by `rlock acquire`")
        })?;
        Ok(Token(u.hyphenated().to_string()))
    }

    /// The token as text (a hyphenated UUID): a secret, print with care.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(***)")
    }
}

/// How long to wait for a busy lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Try once.
    No,
    /// Wait at most this long.
    For(Duration),
    /// Wait until granted (the default, like flock).
    Forever,
}

/// What kind of hold to ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// An exclusive lock, or a counting semaphore with `limit` > 1.
    Exclusive,
    /// A shared hold of a read-write lock.
    Read,
    /// The exclusive hold of a read-write lock.
    Write,
}

impl Mode {
    pub(super) fn arg(self) -> &'static str {
        match self {
            Mode::Exclusive => "x",
            Mode::Read => "r",
            Mode::Write => "w",
        }
    }
}

/// What to ask for: valid by construction, made only by
/// [`RequestBuilder::build`] (or [`Request::new`]), which refuses what no
/// server could grant. Its settings are read with the getters below and
/// changed through [`Request::to_builder`], so an invalid request never
/// reaches a backend.
#[derive(Clone, Debug)]
pub struct Request {
    pub(crate) ttl: Duration,
    pub(crate) mode: Mode,
    pub(crate) limit: u32,
    pub(crate) wait: Wait,
    pub(crate) reenter: Option<Token>,
    pub(crate) info: HolderInfo,
    pub(crate) min_hold: Duration,
    pub(crate) supersede: bool,
    pub(crate) priority: i32,
    /// The token a fresh acquire asks (and queues) with, chosen by the
    /// caller (see [`Request::with_token`]); None: a new one.
    pub(crate) token: Option<Token>,
}

impl Request {
    /// An exclusive lock for `ttl`, one holder, waiting as long as it
    /// takes, for this process: [`Request::builder`]`(ttl).build()`.
    pub fn new(ttl: Duration) -> Result<Request> {
        Request::builder(ttl).build()
    }

    /// A request for `ttl` to set up: an exclusive lock, one holder,
    /// waiting as long as it takes, for this process unless
    /// [`RequestBuilder::info`] says otherwise.
    pub fn builder(ttl: Duration) -> RequestBuilder {
        RequestBuilder {
            ttl,
            mode: Mode::Exclusive,
            limit: 1,
            wait: Wait::Forever,
            reenter: None,
            info: None,
            min_hold: Duration::ZERO,
            supersede: false,
            priority: 0,
        }
    }

    /// This request's settings, to change some and build again.
    pub fn to_builder(&self) -> RequestBuilder {
        RequestBuilder {
            ttl: self.ttl,
            mode: self.mode,
            limit: self.limit,
            wait: self.wait,
            reenter: self.reenter.clone(),
            info: Some(self.info.clone()),
            min_hold: self.min_hold,
            supersede: self.supersede,
            priority: self.priority,
        }
    }

    /// The same request with `wait` left, for the next try of one that
    /// waited already (a set's later locks). No wait left joins no queue,
    /// where `supersede` acts: it is dropped then, which keeps the request
    /// one [`RequestBuilder::build`] would accept.
    pub(crate) fn waiting(&self, wait: Wait) -> Request {
        Request {
            wait,
            supersede: self.supersede && !matches!(wait, Wait::No | Wait::For(Duration::ZERO)),
            ..self.clone()
        }
    }

    /// The same request, its fresh acquire asking with `token` (a token
    /// nobody else has): exec tells its guard the token before it waits,
    /// so that the guard can give up the place should rlock die (see
    /// `exec::take::Told`). A backend that takes a new token per attempt
    /// (RedLock) ignores it: see [`crate::Backend::takes_token`].
    pub(crate) fn with_token(&self, token: Token) -> Request {
        Request {
            token: Some(token),
            ..self.clone()
        }
    }

    /// See [`RequestBuilder::ttl`].
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// See [`RequestBuilder::mode`].
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// See [`RequestBuilder::limit`].
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// See [`RequestBuilder::wait`].
    pub fn wait(&self) -> Wait {
        self.wait
    }

    /// See [`RequestBuilder::reenter`].
    pub fn reenter(&self) -> Option<&Token> {
        self.reenter.as_ref()
    }

    /// See [`RequestBuilder::info`].
    pub fn info(&self) -> &HolderInfo {
        &self.info
    }

    /// See [`RequestBuilder::min_hold`].
    pub fn min_hold(&self) -> Duration {
        self.min_hold
    }

    /// See [`RequestBuilder::supersede`].
    pub fn supersede(&self) -> bool {
        self.supersede
    }

    /// See [`RequestBuilder::priority`].
    pub fn priority(&self) -> i32 {
        self.priority
    }
}

/// A [`Request`]'s settings, checked by [`RequestBuilder::build`].
#[derive(Clone, Debug)]
pub struct RequestBuilder {
    ttl: Duration,
    mode: Mode,
    limit: u32,
    wait: Wait,
    reenter: Option<Token>,
    /// None: [`HolderInfo::current`], found at the build.
    info: Option<HolderInfo>,
    min_hold: Duration,
    supersede: bool,
    priority: i32,
}

impl RequestBuilder {
    /// How long a lease lasts unless renewed: from [`MIN_TTL`] to
    /// [`MAX_TTL`].
    pub fn ttl(mut self, ttl: Duration) -> RequestBuilder {
        self.ttl = ttl;
        self
    }

    /// Exclusive (or semaphore), read, or write.
    pub fn mode(mut self, mode: Mode) -> RequestBuilder {
        self.mode = mode;
        self
    }

    /// Holders allowed at once (1: exclusive lock). Only for
    /// [`Mode::Exclusive`]; read-write locks need 1.
    pub fn limit(mut self, limit: u32) -> RequestBuilder {
        self.limit = limit;
        self
    }

    /// Whether and how long to wait while the lock is busy.
    pub fn wait(mut self, wait: Wait) -> RequestBuilder {
        self.wait = wait;
        self
    }

    /// Re-enter with this token if it holds the lock (a parent `rlock
    /// exec`, say); if it does not, acquire with a fresh token as usual.
    pub fn reenter(mut self, token: Option<Token>) -> RequestBuilder {
        self.reenter = token;
        self
    }

    /// Who asks, stored beside the grant for `status` to show.
    pub fn info(mut self, info: HolderInfo) -> RequestBuilder {
        self.info = Some(info);
        self
    }

    /// A new grant's lease lasts at least this long after the grant, even
    /// if it is released sooner (zero: no minimum). At most [`MAX_TTL`].
    pub fn min_hold(mut self, min_hold: Duration) -> RequestBuilder {
        self.min_hold = min_hold;
        self
    }

    /// "Newest wins" (a CI queue that runs only the latest job): when this
    /// acquire joins the wait queue, the `supersede` waiter queued before
    /// it leaves the queue and its acquire fails with
    /// [`Error::Superseded`]; a later one replaces this one the same way.
    /// Holders are never touched. Needs a wait (not [`Wait::No`]) and one
    /// Redis (or Sentinel, or Cluster): RedLock refuses it.
    pub fn supersede(mut self, supersede: bool) -> RequestBuilder {
        self.supersede = supersede;
        self
    }

    /// Waiters with a higher priority are served before lower ones; equal
    /// priorities in arrival order. From -[`MAX_PRIORITY`] to
    /// [`MAX_PRIORITY`], default 0. It orders the wait queue only: a holder
    /// is never pre-empted, and a steady stream of higher priorities can
    /// keep a lower one waiting for as long as it waits (bound it with
    /// [`Wait::For`]). Needs one Redis (or Sentinel, or Cluster): RedLock,
    /// which keeps no wait queue, refuses a priority other than 0.
    pub fn priority(mut self, priority: i32) -> RequestBuilder {
        self.priority = priority;
        self
    }

    /// The request, refused ([`Error::Invalid`]) if no server could grant
    /// it: a TTL out of range, no slots, a read-write lock with slots, a
    /// supersede that never queues, a priority or min-hold out of range.
    pub fn build(self) -> Result<Request> {
        check_ttl(self.ttl)?;
        if self.limit == 0 {
            return Err(Error::Invalid(msg![Setting::Limit, " must be at least 1"]));
        }
        if self.limit != 1 && self.mode != Mode::Exclusive {
            return Err(Error::Invalid(msg![
                "read-write locks take no ",
                Setting::Limit,
                " (it must be 1)"
            ]));
        }
        if self.supersede && matches!(self.wait, Wait::No | Wait::For(Duration::ZERO)) {
            return Err(Error::Invalid(msg![
                Setting::Supersede,
                " needs a wait: it replaces older waiters when it joins the queue, which ",
                Setting::WaitNo,
                " and ",
                Setting::WaitZero,
                " never do"
            ]));
        }
        if !(-MAX_PRIORITY..=MAX_PRIORITY).contains(&self.priority) {
            return Err(Error::Invalid(msg![
                Setting::Priority,
                format!(
                    " {} is out of range: from {} to {}",
                    self.priority, -MAX_PRIORITY, MAX_PRIORITY
                )
            ]));
        }
        if self.min_hold > MAX_TTL {
            return Err(Error::Invalid(msg![
                Setting::MinHold,
                format!(
                    " {} is too long: at most {}",
                    human(self.min_hold),
                    human(MAX_TTL)
                )
            ]));
        }
        Ok(Request {
            ttl: self.ttl,
            mode: self.mode,
            limit: self.limit,
            wait: self.wait,
            reenter: self.reenter,
            info: self.info.unwrap_or_else(|| HolderInfo::current(None)),
            min_hold: self.min_hold,
            supersede: self.supersede,
            priority: self.priority,
            token: None,
        })
    }
}

/// How a release gives holds back (see [`crate::Locker::release_with`]);
/// the default is [`crate::Locker::release`]'s: one hold, honouring the
/// min-hold given at the grant, noted as a plain release, resent for a
/// while if Redis does not answer. Valid by construction: a min-hold is
/// set only by [`Release::holds`], which refuses one over [`MAX_TTL`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Release {
    pub(crate) all: bool,
    pub(crate) min_hold: Option<Duration>,
    pub(crate) note: ReleaseNote,
    pub(crate) within: Option<Duration>,
}

impl Default for Release {
    fn default() -> Release {
        Release {
            all: false,
            min_hold: Some(Duration::ZERO),
            note: ReleaseNote::default(),
            within: None,
        }
    }
}

impl Release {
    /// Every hold of the token if `all`, else one, with `min_hold` as
    /// [`Release::min_hold`] says; refused ([`Error::Invalid`]) over
    /// [`MAX_TTL`], a min-hold no server would keep.
    pub fn holds(all: bool, min_hold: Option<Duration>) -> Result<Release> {
        match min_hold {
            Some(d) if d > MAX_TTL => Err(Error::Invalid(msg![
                Setting::ReleaseMinHold,
                format!(" is too long: at most {}", human(MAX_TTL))
            ])),
            _ => Ok(Release {
                all,
                min_hold,
                ..Release::default()
            }),
        }
    }

    /// One hold, freed at once whatever min-hold was asked: a give-back.
    pub fn at_once() -> Release {
        Release {
            min_hold: None,
            ..Release::default()
        }
    }

    /// Every hold of the token if `all`, else one, honouring the min-hold
    /// given at the grant if `honour`, else freed at once: the releases
    /// the library makes itself, which name no min-hold of their own.
    pub(crate) fn of(all: bool, honour: bool) -> Release {
        Release {
            all,
            min_hold: honour.then_some(Duration::ZERO),
            ..Release::default()
        }
    }

    /// The same release of every hold of the token if `all`, else of one.
    pub fn all_holds(self, all: bool) -> Release {
        Release { all, ..self }
    }

    /// The same release, noted in the lock's history as `note` says.
    pub fn noted(self, note: ReleaseNote) -> Release {
        Release { note, ..self }
    }

    /// The same release sent once, never resent, connecting and the reply
    /// each waited for at most `within`.
    pub fn sent_once(self, within: Duration) -> Release {
        Release {
            within: Some(within),
            ..self
        }
    }

    /// Every hold of the token at once, re-entries included (and any place
    /// in the wait queue): what the outermost holder does, so that a nested
    /// holder that died without releasing cannot keep the lock held.
    pub fn all(&self) -> bool {
        self.all
    }

    /// Some(d): the last hold's lease ends no sooner than d, or the
    /// min-hold given at the grant, after the grant (nobody renewing it
    /// meanwhile); None frees the lock at once whatever min-hold was asked.
    /// At most [`MAX_TTL`].
    pub fn min_hold(&self) -> Option<Duration> {
        self.min_hold
    }

    /// How the hold ended, for the lock's history (exec's exit code, or
    /// `overran`).
    pub fn note(&self) -> ReleaseNote {
        self.note
    }

    /// Some(d): sent once, never resent, connecting and the reply each
    /// waited for at most d; for a release that can only free what is left
    /// of a lease, such as after the lease was lost. RedLock's per-master
    /// timeouts are short already: it releases as without.
    pub fn within(&self) -> Option<Duration> {
        self.within
    }
}

/// A renewal's terms (see [`crate::Backend::renew`]): a TTL in range,
/// checked when it is made, and the pid of the command the holder runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Renewal {
    ttl: Duration,
    cmd_pid: Option<u32>,
}

impl Renewal {
    /// A renewal for `ttl`, noting no command pid; refused (as
    /// [`check_ttl`]) out of range.
    pub fn new(ttl: Duration) -> Result<Renewal> {
        check_ttl(ttl)?;
        Ok(Renewal { ttl, cmd_pid: None })
    }

    /// The same renewal, noting `cmd_pid` for `status` if given.
    pub fn noted(self, cmd_pid: Option<u32>) -> Renewal {
        Renewal { cmd_pid, ..self }
    }

    /// How long the lease lasts from now on, at least.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The pid of the command the holder runs, to note.
    pub fn cmd_pid(&self) -> Option<u32> {
        self.cmd_pid
    }
}

/// Reject TTLs that are zero, too short to renew, or absurdly long.
pub fn check_ttl(ttl: Duration) -> Result<()> {
    if ttl < MIN_TTL || ttl > MAX_TTL {
        return Err(Error::invalid(format!(
            "TTL {} is out of range: use {} to {}",
            human(ttl),
            human(MIN_TTL),
            human(MAX_TTL)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
