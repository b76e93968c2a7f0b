//! One Redis URL checked and turned into connection settings: its scheme
//! against the features built in and the TLS options, RLOCK_PASSWORD
//! applied, and a label and a redacted form that are safe to print.

use redis::IntoConnectionInfo;

use super::{ConnectOptions, redact};
use crate::{Error, Result};

/// A URL checked and turned into connection settings.
pub(super) struct Seed {
    pub(super) info: redis::ConnectionInfo,
    pub(super) label: String,
    /// The URL, redacted.
    pub(super) shown: String,
    pub(super) tls: bool,
}

impl Seed {
    /// `password`: apply RLOCK_PASSWORD (not to Sentinels, which have their
    /// own credentials in their URLs).
    pub(super) fn parse(url: &str, opts: &ConnectOptions, password: bool) -> Result<Seed> {
        let shown = redact(url);
        let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or("");
        match scheme {
            "redis" | "unix" | "redis+unix" if opts.tls.is_set() => {
                return Err(Error::Usage(format!(
                    "Redis URL {shown}: --tls-ca/--tls-cert/--tls-key need a rediss:// URL"
                )));
            }
            "redis" | "unix" | "redis+unix" => {}
            "rediss" if cfg!(feature = "tls") => {}
            "rediss" => {
                return Err(Error::Usage(format!(
                    "Redis URL {shown}: this rlock was built without TLS support (the \"tls\" \
                     feature); use redis:// or unix://"
                )));
            }
            _ => {
                return Err(Error::Usage(format!(
                    "Redis URL {shown}: unknown scheme; use redis://, rediss:// or unix://"
                )));
            }
        }
        let info = url.into_connection_info().map_err(|e| {
            Error::Usage(format!(
                "invalid Redis URL {shown}: {}",
                e.detail().unwrap_or("does not parse")
            ))
        })?;
        let mut redis = info.redis_settings().clone().set_skip_set_lib_name();
        if let Some(pw) = opts.password.as_ref().filter(|_| password) {
            redis = redis.set_password(pw);
        }
        let label = info.addr().to_string();
        Ok(Seed {
            info: info.set_redis_settings(redis),
            label,
            shown,
            tls: scheme == "rediss",
        })
    }
}
