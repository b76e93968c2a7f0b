//! What to connect to and how: [`ConnectOptions`], and the TLS files of
//! `rediss://` URLs.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::Setting;
use crate::{Error, Result, msg};

/// Where and how to connect. Serializable: the keeper of `acquire --keep`
/// and exec's releaser get it on a pipe from the process that connected
/// (the password never on an argv).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
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
    /// The index of locks in use (see docs/internals.md).
    #[serde(default)]
    pub index: Index,
}

/// How this client uses the index of locks in use.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Index {
    /// How long an index entry outlives the lease it was touched for
    /// (default one hour; at least 100 ms). A holder or waiter touches its
    /// entry again after half of it: shorter only for tests of the refresh.
    pub keep: Duration,
    /// `list`, `top` and `metrics` find locks by scanning the whole
    /// keyspace instead of through the index (locks taken by an rlock
    /// older than the index are in no index).
    pub scan: bool,
}

impl Index {
    /// [`Index::keep`], at least 100 ms.
    pub(crate) fn keep(&self) -> Duration {
        self.keep.max(Duration::from_millis(100))
    }
}

impl Default for Index {
    fn default() -> Self {
        Index {
            keep: Duration::from_secs(3600),
            scan: false,
        }
    }
}

/// TLS files for `rediss://` URLs.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
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
        let read = |flag: Setting, path: &PathBuf| {
            std::fs::read(path).map_err(|e| {
                Error::Invalid(msg![
                    "cannot read ",
                    flag,
                    format!(" {}: {e}", path.display())
                ])
            })
        };
        // A file with no certificate in it (a key, the wrong file) would
        // trust nothing, or show none, and every handshake would fail as
        // if the server were at fault: it is bad input.
        let certs = |flag: Setting, path: &PathBuf| {
            let pem = read(flag, path)?;
            if !pem
                .windows(CERT_PEM.len())
                .any(|w| w == CERT_PEM.as_bytes())
            {
                return Err(Error::Invalid(msg![
                    flag,
                    format!(
                        " {}: no certificate in it (want PEM, \"{CERT_PEM}\")",
                        path.display()
                    )
                ]));
            }
            Ok(pem)
        };
        let client_tls = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
                client_cert: certs(Setting::TlsCert, cert)?,
                client_key: read(Setting::TlsKey, key)?,
            }),
            (None, None) => None,
            _ => {
                return Err(Error::Invalid(msg![
                    Setting::TlsCert,
                    " and ",
                    Setting::TlsKey,
                    " go together"
                ]));
            }
        };
        let root_cert = self
            .ca
            .as_ref()
            .map(|ca| certs(Setting::TlsCa, ca))
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
            return Err(Error::Invalid(msg![
                Setting::ConnectTimeout,
                format!(
                    " {} is out of range: use 1ms to 1h",
                    crate::duration::human(self.connect_timeout)
                )
            ]));
        }
        if self.urls.is_empty() {
            return Err(Error::invalid("no Redis URL given"));
        }
        Ok(())
    }

    /// The checks on Cluster and Sentinel, made once every URL has parsed
    /// (so a bad URL is what a user hears of first, as always).
    pub(super) fn check_mode(&self) -> Result<()> {
        if self.cluster && self.sentinel.is_some() {
            return Err(Error::Invalid(msg![
                Setting::Cluster,
                " and ",
                Setting::Sentinel,
                " exclude each other"
            ]));
        }
        if self.cluster {
            if !cfg!(feature = "cluster") {
                return Err(Error::Invalid(msg![
                    Setting::Cluster,
                    ": this rlock was built without Redis Cluster support (the \"cluster\" \
                     feature)"
                ]));
            }
            if self.min_replicas > 0 {
                // redis-rs sends WAIT to every master, not the key's own.
                return Err(Error::Invalid(msg![
                    Setting::MinReplicas,
                    " is not supported with ",
                    Setting::Cluster
                ]));
            }
        }
        if let Some(name) = &self.sentinel
            && (name.is_empty() || name.chars().any(char::is_control))
        {
            return Err(Error::Invalid(msg![
                "invalid ",
                Setting::Sentinel,
                format!(" master name {name:?}")
            ]));
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
            index: Index::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Message;

    fn usage(res: Result<()>) -> Message {
        match res {
            Err(Error::Invalid(m)) => m,
            other => panic!("not a usage error: {other:?}"),
        }
    }

    #[test]
    fn defaults() {
        let o = ConnectOptions::default();
        assert_eq!(o.urls, ["redis://127.0.0.1:6379"]);
        assert_eq!(o.connect_timeout, Duration::from_secs(2));
        assert_eq!(o.password, None);
        assert!(!o.cluster && o.sentinel.is_none() && o.min_replicas == 0);
        assert!(!o.tls.is_set());
        assert!(o.check().is_ok() && o.check_mode().is_ok());
    }

    #[test]
    fn connect_timeout_is_1ms_to_1h() {
        let with = |ms| ConnectOptions {
            connect_timeout: Duration::from_millis(ms),
            ..Default::default()
        };
        assert!(with(1).check().is_ok());
        assert!(with(3_600_000).check().is_ok());
        assert_eq!(
            usage(with(0).check()),
            msg![
                Setting::ConnectTimeout,
                " 0ms is out of range: use 1ms to 1h"
            ]
        );
        assert_eq!(
            usage(with(3_601_000).check()).to_string(),
            "ConnectOptions::connect_timeout 1h 1s is out of range: use 1ms to 1h"
        );
    }

    #[test]
    fn at_least_one_url() {
        let o = ConnectOptions {
            urls: vec![],
            ..Default::default()
        };
        assert_eq!(usage(o.check()), "no Redis URL given".into());
    }

    #[test]
    fn cluster_and_sentinel_exclude_each_other() {
        let o = ConnectOptions {
            cluster: true,
            sentinel: Some("mymaster".into()),
            ..Default::default()
        };
        assert_eq!(
            usage(o.check_mode()),
            msg![
                Setting::Cluster,
                " and ",
                Setting::Sentinel,
                " exclude each other"
            ]
        );
    }

    #[test]
    fn min_replicas_goes_without_cluster() {
        let o = ConnectOptions {
            cluster: true,
            min_replicas: 1,
            ..Default::default()
        };
        let m = usage(o.check_mode());
        if cfg!(feature = "cluster") {
            assert_eq!(
                m,
                msg![
                    Setting::MinReplicas,
                    " is not supported with ",
                    Setting::Cluster
                ]
            );
        } else {
            // Without the feature, --cluster is what is wrong.
            assert_eq!(m.0[0], Setting::Cluster.into(), "{m}");
        }
        for o in [
            ConnectOptions {
                min_replicas: 2,
                ..Default::default()
            },
            ConnectOptions {
                min_replicas: 1,
                sentinel: Some("m".into()),
                ..Default::default()
            },
        ] {
            assert!(o.check_mode().is_ok());
        }
    }

    #[test]
    fn sentinel_master_names() {
        let named = |n: &str| ConnectOptions {
            sentinel: Some(n.into()),
            ..Default::default()
        };
        for good in ["mymaster", "my-master.1", "my master", "主"] {
            assert!(named(good).check_mode().is_ok(), "{good}");
        }
        assert_eq!(
            usage(named("").check_mode()).to_string(),
            "invalid ConnectOptions::sentinel master name \"\""
        );
        assert_eq!(
            usage(named("a\nb").check_mode()).to_string(),
            "invalid ConnectOptions::sentinel master name \"a\\nb\""
        );
        assert_eq!(
            usage(named("m\u{7f}").check_mode()).to_string(),
            "invalid ConnectOptions::sentinel master name \"m\\u{7f}\""
        );
    }

    #[test]
    fn tls_is_set_by_any_file() {
        assert!(!Tls::default().is_set());
        for tls in [
            Tls {
                ca: Some("/ca".into()),
                ..Default::default()
            },
            Tls {
                cert: Some("/cert".into()),
                ..Default::default()
            },
            Tls {
                key: Some("/key".into()),
                ..Default::default()
            },
        ] {
            assert!(tls.is_set(), "{tls:?}");
        }
    }

    /// A file of this test's own under the temporary directory, removed
    /// when dropped.
    #[cfg(feature = "tls")]
    struct TempFile(PathBuf);

    #[cfg(feature = "tls")]
    impl TempFile {
        fn new(name: &str, text: &str) -> TempFile {
            let path = rlock_test_support::scratch_path(&format!("conn-test-{name}"));
            std::fs::write(&path, text).unwrap();
            TempFile(path)
        }
    }

    #[cfg(feature = "tls")]
    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    #[cfg(feature = "tls")]
    const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    #[cfg(feature = "tls")]
    fn certificates_err(tls: &Tls) -> String {
        match tls.certificates() {
            Err(Error::Invalid(m)) => m.to_string(),
            Err(e) => panic!("not a usage error: {e}"),
            Ok(_) => panic!("accepted {tls:?}"),
        }
    }

    #[cfg(feature = "tls")]
    #[test]
    fn a_client_certificate_needs_its_key() {
        let cert = TempFile::new("lonely-cert.pem", PEM);
        let key = TempFile::new("lonely-key.pem", "KEY");
        for tls in [
            Tls {
                cert: Some(cert.0.clone()),
                ..Default::default()
            },
            Tls {
                key: Some(key.0.clone()),
                ..Default::default()
            },
        ] {
            assert_eq!(certificates_err(&tls), "Tls::cert and Tls::key go together");
        }
    }

    #[cfg(feature = "tls")]
    #[test]
    fn unreadable_tls_files() {
        let tls = Tls {
            ca: Some("/nonexistent/rlock-ca.pem".into()),
            ..Default::default()
        };
        let m = certificates_err(&tls);
        assert!(
            m.starts_with("cannot read Tls::ca /nonexistent/rlock-ca.pem: "),
            "{m}"
        );
        let cert = TempFile::new("unread-cert.pem", PEM);
        let tls = Tls {
            cert: Some(cert.0.clone()),
            key: Some("/nonexistent/rlock-key.pem".into()),
            ..Default::default()
        };
        let m = certificates_err(&tls);
        assert!(
            m.starts_with("cannot read Tls::key /nonexistent/rlock-key.pem: "),
            "{m}"
        );
    }

    #[cfg(feature = "tls")]
    #[test]
    fn a_certificate_file_must_hold_a_certificate() {
        let key = TempFile::new("not-a-cert.pem", "-----BEGIN PRIVATE KEY-----\n");
        let shown = key.0.display().to_string();
        let tls = Tls {
            ca: Some(key.0.clone()),
            ..Default::default()
        };
        assert_eq!(
            certificates_err(&tls),
            format!(
                "Tls::ca {shown}: no certificate in it (want PEM, \"-----BEGIN CERTIFICATE-----\")"
            )
        );
        let tls = Tls {
            cert: Some(key.0.clone()),
            key: Some(key.0.clone()),
            ..Default::default()
        };
        assert!(certificates_err(&tls).starts_with(&format!("Tls::cert {shown}: no certificate")));
    }

    #[cfg(feature = "tls")]
    #[test]
    fn tls_files_are_read_as_given() {
        let ca = TempFile::new("good-ca.pem", PEM);
        let cert = TempFile::new("good-cert.pem", &format!("subject=x\n{PEM}"));
        let key = TempFile::new("good-key.pem", "-----BEGIN PRIVATE KEY-----\n");
        let certs = Tls {
            ca: Some(ca.0.clone()),
            ..Default::default()
        }
        .certificates()
        .unwrap();
        assert_eq!(certs.root_cert.as_deref(), Some(PEM.as_bytes()));
        assert!(certs.client_tls.is_none());
        let certs = Tls {
            ca: None,
            cert: Some(cert.0.clone()),
            key: Some(key.0.clone()),
        }
        .certificates()
        .unwrap();
        assert!(certs.root_cert.is_none());
        let client = certs.client_tls.unwrap();
        assert_eq!(client.client_cert, format!("subject=x\n{PEM}").as_bytes());
        assert_eq!(client.client_key, b"-----BEGIN PRIVATE KEY-----\n");
    }
}
