//! The transport: a node's connection (connecting, reuse after idling,
//! what a failure does to it) and the script calls on it (EVALSHA, NOSCRIPT,
//! resends, the index touch pipelined behind a script).

use std::time::{Duration, Instant};

use redis::{FromRedisValue, Value};

use super::Node;
use crate::conn::{Conn, IDLE_RECONNECT};
use crate::lock::backoff;
use crate::lock::script::{Lua, resendable};
use crate::{Error, Result};

/// How far a failed call got.
pub(crate) enum Call {
    /// Never sent (connecting failed): it did not run.
    NotSent,
    /// Sent: it may have run.
    Sent,
    /// Sent and unanswered (a timeout) on this connection, still open:
    /// only ever used to queue a give-back behind that call, never to read
    /// from.
    Silent(Box<Conn>),
}

/// A failed call: the error, and how far the call got.
pub(crate) struct Failed {
    pub(crate) error: Error,
    pub(crate) call: Call,
}

impl Failed {
    fn unsent(error: Error) -> Failed {
        Failed {
            error,
            call: Call::NotSent,
        }
    }

    fn sent(error: Error) -> Failed {
        Failed {
            error,
            call: Call::Sent,
        }
    }
}

/// A failure after the call was answered (decoding its reply, what
/// follows): it may have run.
impl From<Error> for Failed {
    fn from(error: Error) -> Failed {
        Failed::sent(error)
    }
}

impl Node {
    /// Connect now, to report an unusable server at once.
    pub(crate) fn connect(&mut self) -> Result<()> {
        self.conn = Some(self.server.connect()?);
        self.no_ro = false;
        // A cluster connection has read the slot map from a node.
        self.answered |= self.server.is_cluster();
        self.last_used = Instant::now();
        Ok(())
    }

    pub(super) fn conn(&mut self) -> Result<&mut Conn> {
        if self.resend_cap.is_zero() && self.last_used.elapsed() > IDLE_RECONNECT {
            self.conn = None;
        }
        self.last_used = Instant::now();
        if self.conn.is_none() {
            self.conn = Some(self.server.connect()?);
            // A new connection may reach another server (a failover, an
            // upgrade): EVALSHA_RO is tried again.
            self.no_ro = false;
        }
        Ok(self.conn.as_mut().expect("just connected"))
    }

    /// Note that a command just finished, so the connection is fresh.
    pub(super) fn used(&mut self) {
        self.last_used = Instant::now();
    }

    pub(in crate::lock) fn fail(&mut self, err: redis::RedisError, what: String) -> Error {
        // After an I/O error or timeout the reply stream may be out of step:
        // never reuse that connection.
        if crate::error::is_unavailable(&err) {
            self.conn = None;
        }
        // A timeout names the server itself (see `no_answer`).
        let what = if (crate::error::is_unavailable(&err) && !err.is_timeout())
            || crate::error::is_oom(&err)
        {
            format!("{what} on Redis at {}", self.server.label)
        } else {
            what
        };
        let err = crate::error::no_answer(err, &self.server.label, self.server.timeout);
        Error::from_redis(err, &what)
    }

    /// Wait at most `timeout` for a connection or a reply from now on.
    pub(super) fn bound_replies(&mut self, timeout: Duration) {
        self.server.timeout = timeout;
        if let Some(c) = &mut self.conn
            && (c.set_read_timeout(Some(timeout)).is_err()
                || c.set_write_timeout(Some(timeout)).is_err())
        {
            self.conn = None;
        }
    }
}

impl Node {
    /// The verbs that run `script`: by its SHA1, and with its code. A
    /// read-only script goes with EVALSHA_RO / EVAL_RO, which a user with
    /// read-only key access may run and in which Redis refuses every write;
    /// on a server that does not know them (Redis 6.2: "unknown command",
    /// noted in `no_ro` for this connection) with EVALSHA / EVAL. Trying
    /// costs nothing where they exist (Redis 7+, Valkey) and one refused
    /// call per connection on 6.2, where asking the version first (INFO,
    /// HELLO) would cost a round trip on every new connection everywhere.
    ///
    /// A user refused EVALSHA_RO itself (NOPERM naming it: an ACL written
    /// before this release, with +evalsha and no +evalsha_ro) is treated
    /// the same, so that such an ACL keeps working: one refused call per
    /// connection (one entry in ACL LOG, counted).
    pub(in crate::lock) fn verbs(&self, script: &Lua) -> (&'static str, &'static str) {
        if script.ro && !self.no_ro {
            ("EVALSHA_RO", "EVAL_RO")
        } else {
            ("EVALSHA", "EVAL")
        }
    }

    /// `script` by its SHA1 with the verb [`Node::verbs`] gives, for a
    /// pipeline ([`Node::batch`]): a reply that [`retry_alone`] names is
    /// sent again through [`Node::eval`].
    pub(in crate::lock) fn script_cmd(&self, script: &Lua) -> redis::Cmd {
        let mut c = redis::cmd(self.verbs(script).0);
        c.arg(script.sha());
        c
    }

    /// Run `script` with EVALSHA, or EVAL when the server lacks it (a
    /// restart, a failover, SCRIPT FLUSH). Done by hand rather than with
    /// redis-rs' Script, whose fallback SCRIPT LOAD goes to every node of a
    /// cluster and fails when any is down; EVAL goes to the key's node only.
    ///
    /// A failure that leaves it unknown whether the script ran, or that
    /// says it could not run yet, is followed by a resend of the very same
    /// call (same token, same request id) on a new connection, with
    /// backoff, for up to `resend_for`: the scripts are idempotent per
    /// request, so a resend never counts twice.
    pub(in crate::lock) fn eval<T: FromRedisValue>(
        &mut self,
        script: &Lua,
        keys: &[String],
        args: &[&str],
        what: impl FnOnce() -> String,
        resend_for: Duration,
    ) -> Result<T> {
        self.eval_traced(script, keys, args, what, resend_for)
            .map(|(v, _)| v)
            .map_err(|f| f.error)
    }

    /// [`Node::eval`], saying how far the call got: with the reply, whether
    /// it was sent more than once; with a failure, whether it was sent at
    /// all, and the connection it went unanswered on.
    pub(super) fn eval_traced<T: FromRedisValue>(
        &mut self,
        script: &Lua,
        keys: &[String],
        args: &[&str],
        what: impl FnOnce() -> String,
        resend_for: Duration,
    ) -> std::result::Result<(T, bool), Failed> {
        let call = |verb: &str, body: &str| {
            let mut c = redis::cmd(verb);
            c.arg(body).arg(keys.len()).arg(keys).arg(args);
            c
        };
        let until = Instant::now() + resend_for.min(self.resend_cap);
        let (cluster, failover) = (self.server.is_cluster(), self.server.follows_failovers());
        // Sleep the next backoff and say to go on, if that stays in time.
        let pause = |tries: &mut u32| {
            let ok = Instant::now() + backoff(*tries + 1) < until;
            if ok {
                *tries += 1;
                std::thread::sleep(backoff(*tries));
            }
            ok
        };
        let mut tries = 0;
        let mut resent = false;
        // An index touch to run right after this script (see
        // src/lock/node/index.rs): in the same pipeline on one server.
        let touch = self.then.take();
        let touch_sent = Instant::now();
        loop {
            let (by_sha, by_code) = self.verbs(script);
            match self.conn() {
                Ok(_) => {}
                // Reconnecting during an outage: keep trying. A first
                // connect fails at once.
                Err(_) if tries > 0 && pause(&mut tries) => continue,
                Err(e) => return Err(Failed::unsent(e)),
            }
            let conn = self.conn.as_mut().expect("just connected");
            let mut touched = None;
            let mut out_of_step = false;
            let mut res = match (&touch, &mut *conn) {
                (Some(t), crate::conn::Conn::One(c)) => with_touch(
                    c,
                    &call(by_sha, script.sha),
                    &t.cmd("EVALSHA"),
                    &mut touched,
                    &mut out_of_step,
                ),
                _ => call(by_sha, script.sha).query(conn),
            };
            if script.ro && !self.no_ro && touch.is_none() && matches!(&res, Err(e) if no_ro(e)) {
                // Redis 6.2, or a user without +evalsha_ro: the same call
                // with EVALSHA, on the same connection (a read-only script
                // has no touch).
                self.no_ro = true;
                continue;
            }

            if matches!(&res, Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript))
            {
                // The touch went in the pipeline before the script ran (and
                // was refused too, or ran first): send both again, the
                // script first, again in one write, so that they land
                // together even if this process is gone by the script's
                // reply (a RedLock master that answers last).
                res = match (&touch, &mut *conn) {
                    (Some(t), crate::conn::Conn::One(c)) if !out_of_step => with_touch(
                        c,
                        &call(by_code, script.code),
                        &t.cmd("EVAL"),
                        &mut touched,
                        &mut out_of_step,
                    ),
                    _ => {
                        touched = None;
                        call(by_code, script.code).query(conn)
                    }
                };
            }
            if out_of_step {
                // Never reuse it: its replies may be out of step.
                self.conn = None;
            }
            self.used();
            // Only a real answer counts: a replica's READONLY does not.
            self.answered |= res.is_ok();
            match res {
                Ok(v) => {
                    if let Some(t) = touch {
                        self.finish_touch(t, touch_sent, touched);
                    }
                    return Ok((v, resent));
                }
                Err(e) if self.answered && resendable(&e, cluster, failover) => {
                    // Never reuse the connection: its replies may be out of
                    // step, and a cluster one has a stale slot map.
                    self.conn = None;
                    resent = true;
                    if !pause(&mut tries) {
                        return Err(Failed::sent(self.fail(e, what())));
                    }
                }
                Err(e) => {
                    // The script refused (data rlock did not write, a bad
                    // request): nothing may be left written, and the touch
                    // pipelined behind it added an entry. Take it back.
                    if let (Some(t), Some(Value::Int(score))) = (&touch, &touched)
                        && !crate::error::is_unavailable(&e)
                    {
                        self.untouch(t, *score);
                    }
                    // Kept for a give-back queued behind this call (see
                    // `Node::abandon_unanswered`).
                    let silent = if e.is_timeout() {
                        self.conn.take()
                    } else {
                        None
                    };
                    let error = self.fail(e, what());
                    return Err(Failed {
                        error,
                        call: match silent {
                            Some(conn) => Call::Silent(Box::new(conn)),
                            None => Call::Sent,
                        },
                    });
                }
            }
        }
    }
}

/// The server does not know the command (EVALSHA_RO before Redis 7):
/// "ERR unknown command 'evalsha_ro', with args beginning with: ...".
pub(in crate::lock) fn unknown_command(e: &redis::RedisError) -> bool {
    e.code() == Some("ERR")
        && e.detail()
            .is_some_and(|d| d.to_ascii_lowercase().starts_with("unknown command"))
}

/// EVALSHA_RO / EVAL_RO cannot be used here: the server does not know
/// them (Redis 6.2), or the user may not run them (NOPERM naming them).
fn no_ro(e: &redis::RedisError) -> bool {
    unknown_command(e)
        || (e.code() == Some("NOPERM")
            && e.detail().is_some_and(|d| {
                let d = d.to_ascii_lowercase();
                d.contains("'evalsha_ro'") || d.contains("'eval_ro'")
            }))
}

/// A pipelined script call's error that the same call sent alone through
/// [`Node::eval`] gets past: NOSCRIPT (the script went: a restart, a
/// failover, SCRIPT FLUSH; EVAL loads it again) or EVALSHA_RO unknown or
/// refused (Redis 6.2, an older ACL; EVALSHA then).
pub(in crate::lock) fn retry_alone(e: &redis::RedisError) -> bool {
    crate::error::code(e) == Some("NOSCRIPT") || no_ro(e)
}

/// `script`, then an index `touch`, in one write; the script's reply is
/// returned, the touch's put in `touched`. The touch's reply is read only
/// after a reply Redis made (an answer or an error reply): after anything
/// else (a timeout, a peer that is not Redis) it may never come, and
/// `out_of_step` says not to use the connection again.
fn with_touch<T: FromRedisValue>(
    c: &mut redis::Connection,
    script: &redis::Cmd,
    touch: &redis::Cmd,
    touched: &mut Option<Value>,
    out_of_step: &mut bool,
) -> redis::RedisResult<T> {
    let mut packed = script.get_packed_command();
    touch.write_packed_command(&mut packed);
    match c
        .send_packed_command(&packed)
        .and_then(|()| c.recv_response())
    {
        Ok(first) => {
            match c.recv_response() {
                Ok(v) => *touched = Some(v),
                Err(_) => *out_of_step = true,
            }
            first
                .extract_error()
                .and_then(|v| Ok(T::from_redis_value(v)?))
        }
        Err(e) => {
            *out_of_step = !e.is_timeout();
            Err(e)
        }
    }
}
