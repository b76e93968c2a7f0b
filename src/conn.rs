//! Connecting to Redis: URL checks, RLOCK_PASSWORD, timeouts, and error
//! messages that never contain a password.

use std::path::PathBuf;
use std::time::Duration;

use redis::IntoConnectionInfo;

use crate::{Error, Result};

const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

/// Where and how to connect.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    /// Redis URLs: `redis://`, `rediss://`, `unix:///path` or `redis+unix:///path`.
    pub urls: Vec<String>,
    /// Password that overrides any in the URL (from RLOCK_PASSWORD).
    pub password: Option<String>,
    /// Bound on connecting, and on waiting for any reply but a blocking wait.
    pub connect_timeout: Duration,
    /// TLS (`rediss://`): a CA certificate (PEM) to trust instead of the
    /// system's roots, and an optional client certificate and key (PEM).
    pub tls: Tls,
}

/// TLS files for `rediss://` URLs.
#[derive(Clone, Debug, Default)]
pub struct Tls {
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

impl Tls {
    fn is_set(&self) -> bool {
        self.ca.is_some() || self.cert.is_some() || self.key.is_some()
    }

    fn certificates(&self) -> Result<redis::TlsCertificates> {
        let read = |flag: &str, path: &PathBuf| {
            std::fs::read(path)
                .map_err(|e| Error::Usage(format!("cannot read {flag} {}: {e}", path.display())))
        };
        let client_tls = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
                client_cert: read("--tls-cert", cert)?,
                client_key: read("--tls-key", key)?,
            }),
            (None, None) => None,
            _ => return Err(Error::Usage("--tls-cert and --tls-key go together".into())),
        };
        let root_cert = self
            .ca
            .as_ref()
            .map(|ca| read("--tls-ca", ca))
            .transpose()?;
        Ok(redis::TlsCertificates {
            client_tls,
            root_cert,
        })
    }
}

/// rustls needs one process-wide crypto provider; ring is the one built in.
fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            urls: vec!["redis://127.0.0.1:6379".into()],
            password: None,
            connect_timeout: Duration::from_secs(2),
            tls: Tls::default(),
        }
    }
}

/// One Redis server: a client that can open connections to it.
#[derive(Clone)]
pub(crate) struct Server {
    client: redis::Client,
    /// host:port or socket path, safe to print.
    pub(crate) label: String,
    pub(crate) timeout: Duration,
}

impl Server {
    /// Every server named in `opts`: one, or several for RedLock.
    pub(crate) fn open_all(opts: &ConnectOptions) -> Result<Vec<Server>> {
        if opts.connect_timeout.is_zero() || opts.connect_timeout > MAX_TIMEOUT {
            return Err(Error::Usage(format!(
                "--connect-timeout {} is out of range: use 1ms to 1h",
                humantime::format_duration(opts.connect_timeout)
            )));
        }
        if opts.urls.is_empty() {
            return Err(Error::Usage("no Redis URL given".into()));
        }
        let servers = opts
            .urls
            .iter()
            .map(|u| Server::parse(u, opts))
            .collect::<Result<Vec<_>>>()?;
        let mut labels: Vec<&str> = servers.iter().map(|s| s.label.as_str()).collect();
        labels.sort();
        if labels.windows(2).any(|w| w[0] == w[1]) {
            return Err(Error::Usage(
                "the same Redis is named twice; RedLock needs independent masters".into(),
            ));
        }
        Ok(servers)
    }

    fn parse(url: &str, opts: &ConnectOptions) -> Result<Server> {
        let shown = redact(url);
        let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or("");
        match scheme {
            "redis" | "unix" | "redis+unix" if opts.tls.is_set() => {
                return Err(Error::Usage(format!(
                    "Redis URL {shown}: --tls-ca/--tls-cert/--tls-key need a rediss:// URL"
                )));
            }
            "redis" | "unix" | "redis+unix" | "rediss" => {}
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
        if let Some(pw) = &opts.password {
            redis = redis.set_password(pw);
        }
        let label = info.addr().to_string();
        let info = info.set_redis_settings(redis);
        let client = if scheme == "rediss" {
            install_crypto_provider();
            if opts.tls.is_set() {
                redis::Client::build_with_tls(info, opts.tls.certificates()?)
            } else {
                redis::Client::open(info)
            }
        } else {
            redis::Client::open(info)
        };
        let client = client.map_err(|e| Error::Usage(format!("{shown}: {e}")))?;
        Ok(Server {
            client,
            label,
            timeout: opts.connect_timeout,
        })
    }

    /// A fresh connection whose replies are bounded by the connect timeout.
    pub(crate) fn connect(&self) -> Result<redis::Connection> {
        let unavailable = |cause| Error::Unavailable {
            context: format!("cannot use Redis at {}", self.label),
            cause,
        };
        let conn = self
            .client
            .get_connection_with_timeout(self.timeout)
            .map_err(unavailable)?;
        conn.set_read_timeout(Some(self.timeout))
            .map_err(unavailable)?;
        conn.set_write_timeout(Some(self.timeout))
            .map_err(unavailable)?;
        Ok(conn)
    }
}

/// The URL with any user:password replaced by `***`. Passwords may hold
/// characters a URL should have escaped (`/`, `?`, `@`), so everything up to
/// the last `@` counts as credentials; what does not look like a URL at all
/// is not echoed if it holds an `@`.
pub fn redact(url: &str) -> String {
    match (url.split_once("://"), url.rfind('@')) {
        (_, None) => url.to_string(),
        (Some((scheme, rest)), Some(_)) => match rest.rfind('@') {
            Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
            None => "<redacted URL>".to_string(),
        },
        (None, Some(_)) => "<redacted URL>".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_credentials() {
        assert_eq!(redact("redis://u:s3cret@h:1/0"), "redis://***@h:1/0");
        assert_eq!(redact("redis://:s3cret@h"), "redis://***@h");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
        assert_eq!(redact("nonsense"), "nonsense");
        assert_eq!(redact("redis://:se?cret@h"), "redis://***@h");
        assert_eq!(redact("redis://user:se/cret@h:1"), "redis://***@h:1");
        assert_eq!(redact("redis:/:secret@h"), "<redacted URL>");
        assert_eq!(redact("redis//:secret@h"), "<redacted URL>");
    }

    #[test]
    fn refuses_unknown_schemes() {
        let opts = |u: &str| ConnectOptions {
            urls: vec![u.into()],
            ..Default::default()
        };
        for bad in ["http://x", "x", "memcache://h:1"] {
            assert!(
                matches!(Server::open_all(&opts(bad)), Err(Error::Usage(_))),
                "{bad}"
            );
        }
        assert!(Server::open_all(&opts("redis://127.0.0.1:1")).is_ok());
    }
}
