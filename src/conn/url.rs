//! One Redis URL checked and turned into connection settings: its scheme
//! against the features built in and the TLS options, RLOCK_PASSWORD
//! applied, and a label and a redacted form that are safe to print.

use redis::IntoConnectionInfo;

use super::{ConnectOptions, redact};
use crate::error::Setting;
use crate::{Error, Result, msg};

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
                return Err(Error::Invalid(msg![
                    format!("Redis URL {shown}: "),
                    Setting::TlsCa,
                    "/",
                    Setting::TlsCert,
                    "/",
                    Setting::TlsKey,
                    " need a rediss:// URL"
                ]));
            }
            "redis" | "unix" | "redis+unix" => {}
            "rediss" if cfg!(feature = "tls") => {}
            "rediss" => {
                return Err(Error::invalid(format!(
                    "Redis URL {shown}: this rlock was built without TLS support (the \"tls\" \
                     feature); use redis:// or unix://"
                )));
            }
            _ => {
                return Err(Error::invalid(format!(
                    "Redis URL {shown}: unknown scheme; use redis://, rediss:// or unix://"
                )));
            }
        }
        let info = url.into_connection_info().map_err(|e| {
            Error::invalid(format!(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> Result<Seed> {
        Seed::parse(url, &ConnectOptions::default(), true)
    }

    fn usage(res: Result<Seed>) -> String {
        match res {
            Err(Error::Invalid(m)) => m.to_string(),
            Err(e) => panic!("not a usage error: {e}"),
            Ok(s) => panic!("parsed: {}", s.label),
        }
    }

    #[test]
    fn host_port_and_database() {
        let s = parse("redis://cache.internal:6380/3").unwrap();
        assert_eq!(s.label, "cache.internal:6380");
        assert_eq!(s.shown, "redis://cache.internal:6380/3");
        assert!(!s.tls);
        let r = s.info.redis_settings();
        assert_eq!(r.db(), 3);
        assert_eq!((r.username(), r.password()), (None, None));
        // CLIENT SETINFO is not sent: servers before 7.2 refuse it.
        assert!(r.skip_set_lib_name());
    }

    #[test]
    fn the_port_defaults_to_6379() {
        assert_eq!(parse("redis://h").unwrap().label, "h:6379");
        assert_eq!(parse("redis://h/").unwrap().info.redis_settings().db(), 0);
    }

    #[test]
    fn user_and_password_from_the_url() {
        let s = parse("redis://alice:s3cret@h:1").unwrap();
        let r = s.info.redis_settings();
        assert_eq!(r.username(), Some("alice"));
        assert_eq!(r.password(), Some("s3cret"));
        assert_eq!(s.shown, "redis://***@h:1");
        // A password alone: the default user.
        let s = parse("redis://:s3cret@h").unwrap();
        let r = s.info.redis_settings();
        assert_eq!((r.username(), r.password()), (None, Some("s3cret")));
    }

    #[test]
    fn url_encoded_passwords_are_decoded_and_hidden() {
        let s = parse("redis://u:p%40ss%3Aw%2Frd@h:1").unwrap();
        assert_eq!(s.info.redis_settings().password(), Some("p@ss:w/rd"));
        assert_eq!(s.shown, "redis://***@h:1");
        assert_eq!(s.label, "h:1");
    }

    #[test]
    fn rlock_password_overrides_the_urls() {
        let opts = ConnectOptions {
            password: Some("from-env".into()),
            ..Default::default()
        };
        let s = Seed::parse("redis://alice:from-url@h", &opts, true).unwrap();
        let r = s.info.redis_settings();
        // The user stays; only the password is replaced.
        assert_eq!(r.username(), Some("alice"));
        assert_eq!(r.password(), Some("from-env"));
        let s = Seed::parse("redis://h", &opts, true).unwrap();
        assert_eq!(s.info.redis_settings().password(), Some("from-env"));
        // Not for a Sentinel: its credentials are its URL's.
        let s = Seed::parse("redis://:sentinel-pw@h:26379", &opts, false).unwrap();
        assert_eq!(s.info.redis_settings().password(), Some("sentinel-pw"));
        let s = Seed::parse("redis://h:26379", &opts, false).unwrap();
        assert_eq!(s.info.redis_settings().password(), None);
    }

    #[test]
    fn unix_sockets() {
        let s = parse("unix:///run/redis.sock").unwrap();
        assert_eq!(s.label, "/run/redis.sock");
        assert!(!s.tls);
        let s = parse("redis+unix:///run/redis.sock?db=2&user=u&pass=hunter2").unwrap();
        assert_eq!(s.label, "/run/redis.sock");
        assert_eq!(s.shown, "redis+unix:///run/redis.sock?***");
        let r = s.info.redis_settings();
        assert_eq!(
            (r.db(), r.username(), r.password()),
            (2, Some("u"), Some("hunter2"))
        );
        assert_eq!(
            usage(parse("unix://")),
            "invalid Redis URL unix://: does not parse"
        );
        // No `//`: not a URL rlock knows.
        assert_eq!(
            usage(parse("unix:/run/redis.sock")),
            "Redis URL unix:/run/redis.sock: unknown scheme; use redis://, rediss:// or unix://"
        );
    }

    #[test]
    fn ipv6_hosts() {
        let s = parse("redis://[::1]:6380").unwrap();
        // The label is redis-rs' host:port, brackets dropped.
        assert_eq!(s.label, "::1:6380");
        assert_eq!(s.shown, "redis://[::1]:6380");
        assert_eq!(
            parse("redis://[2001:db8::7]").unwrap().label,
            "2001:db8::7:6379"
        );
        assert!(matches!(parse("redis://::1:6380"), Err(Error::Invalid(_))));
    }

    #[test]
    fn bad_ports_and_missing_hosts() {
        for bad in [
            "redis://h:99999",
            "redis://h:port",
            "redis://h:-1",
            "redis://",
            "redis:///0",
            "redis://h/db",
            "redis://0.0.0.0:6379",
        ] {
            assert_eq!(
                usage(parse(bad)),
                format!("invalid Redis URL {bad}: does not parse"),
            );
        }
    }

    #[test]
    fn errors_never_show_the_password() {
        for (bad, shown) in [
            ("redis://u:hunter2@h:99999", "redis://***@h:99999"),
            ("redis://:hunter2@/0", "redis://***@/0"),
            ("http://:hunter2@h", "http://***@h"),
            ("rediss//:hunter2@h", "<redacted URL>"),
        ] {
            let m = usage(parse(bad));
            assert!(m.contains(shown), "{m}");
            assert!(!m.contains("hunter2"), "{m}");
        }
    }

    #[test]
    fn unknown_schemes() {
        for bad in ["http://h:6379", "h:6379", "", "memcache://h", "valkey://h"] {
            assert_eq!(
                usage(parse(bad)),
                format!("Redis URL {bad}: unknown scheme; use redis://, rediss:// or unix://"),
            );
        }
    }

    #[test]
    fn tls_files_need_a_rediss_url() {
        let opts = ConnectOptions {
            tls: super::super::Tls {
                ca: Some("/etc/ca.pem".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        for url in ["redis://:pw@h", "unix:///s.sock"] {
            assert_eq!(
                usage(Seed::parse(url, &opts, true)),
                format!(
                    "Redis URL {}: Tls::ca/Tls::cert/Tls::key need a rediss:// URL",
                    redact(url)
                )
            );
        }
    }

    #[cfg(feature = "tls")]
    #[test]
    fn rediss_urls() {
        let s = parse("rediss://:pw@h:6380/1").unwrap();
        assert!(s.tls);
        assert_eq!(s.label, "h:6380");
        assert_eq!(s.shown, "rediss://***@h:6380/1");
        assert_eq!(s.info.redis_settings().db(), 1);
        assert!(matches!(
            s.info.addr(),
            redis::ConnectionAddr::TcpTls {
                insecure: false,
                ..
            }
        ));
    }
}
