//! What to connect to and how: [`ConnectOptions`], and the TLS files of
//! `rediss://` URLs.

use std::path::PathBuf;
use std::time::Duration;

use crate::{Error, Result};

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
    /// The URLs are seed nodes of one Redis Cluster.
    pub cluster: bool,
    /// The URLs are Sentinels watching the master of this name.
    pub sentinel: Option<String>,
    /// After a grant, wait (with WAIT) until this many replicas have it;
    /// fewer within the connect timeout fails the acquire.
    pub min_replicas: u32,
}

/// TLS files for `rediss://` URLs.
#[derive(Clone, Debug, Default)]
pub struct Tls {
    /// A CA certificate (PEM) to trust instead of the system's roots.
    pub ca: Option<PathBuf>,
    /// A client certificate (PEM), for servers that ask for one; needs `key`.
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub key: Option<PathBuf>,
}

impl Tls {
    pub(super) fn is_set(&self) -> bool {
        self.ca.is_some() || self.cert.is_some() || self.key.is_some()
    }

    #[cfg(feature = "tls")]
    pub(super) fn certificates(&self) -> Result<redis::TlsCertificates> {
        let read = |flag: &str, path: &PathBuf| {
            std::fs::read(path)
                .map_err(|e| Error::Usage(format!("cannot read {flag} {}: {e}", path.display())))
        };
        // A file with no certificate in it (a key, the wrong file) would
        // trust nothing, or show none, and every handshake would fail as
        // if the server were at fault: it is bad input.
        let certs = |flag: &str, path: &PathBuf| {
            let pem = read(flag, path)?;
            if !pem
                .windows(CERT_PEM.len())
                .any(|w| w == CERT_PEM.as_bytes())
            {
                return Err(Error::Usage(format!(
                    "{flag} {}: no certificate in it (want PEM, \"{CERT_PEM}\")",
                    path.display()
                )));
            }
            Ok(pem)
        };
        let client_tls = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
                client_cert: certs("--tls-cert", cert)?,
                client_key: read("--tls-key", key)?,
            }),
            (None, None) => None,
            _ => return Err(Error::Usage("--tls-cert and --tls-key go together".into())),
        };
        let root_cert = self
            .ca
            .as_ref()
            .map(|ca| certs("--tls-ca", ca))
            .transpose()?;
        Ok(redis::TlsCertificates {
            client_tls,
            root_cert,
        })
    }
}

/// What starts a certificate in a PEM file.
#[cfg(feature = "tls")]
const CERT_PEM: &str = "-----BEGIN CERTIFICATE-----";

/// rustls needs one process-wide crypto provider; ring is the one built in.
#[cfg(feature = "tls")]
pub(super) fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The longest `--connect-timeout`.
const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

impl ConnectOptions {
    /// The checks made before any URL is parsed.
    pub(super) fn check(&self) -> Result<()> {
        if self.connect_timeout.is_zero() || self.connect_timeout > MAX_TIMEOUT {
            return Err(Error::Usage(format!(
                "--connect-timeout {} is out of range: use 1ms to 1h",
                crate::duration::human(self.connect_timeout)
            )));
        }
        if self.urls.is_empty() {
            return Err(Error::Usage("no Redis URL given".into()));
        }
        Ok(())
    }

    /// The checks on Cluster and Sentinel, made once every URL has parsed
    /// (so a bad URL is what a user hears of first, as always).
    pub(super) fn check_mode(&self) -> Result<()> {
        if self.cluster && self.sentinel.is_some() {
            return Err(Error::Usage(
                "--cluster and --sentinel exclude each other".into(),
            ));
        }
        if self.cluster {
            if !cfg!(feature = "cluster") {
                return Err(Error::Usage(
                    "--cluster: this rlock was built without Redis Cluster support (the \
                     \"cluster\" feature)"
                        .into(),
                ));
            }
            if self.min_replicas > 0 {
                // redis-rs sends WAIT to every master, not the key's own.
                return Err(Error::Usage(
                    "--min-replicas is not supported with --cluster".into(),
                ));
            }
        }
        if let Some(name) = &self.sentinel
            && (name.is_empty() || name.chars().any(char::is_control))
        {
            return Err(Error::Usage(format!(
                "invalid --sentinel master name {name:?}"
            )));
        }
        Ok(())
    }
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            urls: vec!["redis://127.0.0.1:6379".into()],
            password: None,
            connect_timeout: Duration::from_secs(2),
            tls: Tls::default(),
            cluster: false,
            sentinel: None,
            min_replicas: 0,
        }
    }
}
