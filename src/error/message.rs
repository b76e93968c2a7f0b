//! A message that names what the library was given by [`Setting`], so that
//! a front end can say it in its own terms (`rlock` says `--limit` where
//! the library says `Request::limit`).

use std::fmt;

/// Something the caller gave the library, named in an error.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// `ConnectOptions::urls`.
    Urls,
    /// `ConnectOptions::connect_timeout`.
    ConnectTimeout,
    /// `ConnectOptions::cluster`.
    Cluster,
    /// `ConnectOptions::sentinel`.
    Sentinel,
    /// `ConnectOptions::min_replicas`.
    MinReplicas,
    /// `Tls::ca`.
    TlsCa,
    /// `Tls::cert`.
    TlsCert,
    /// `Tls::key`.
    TlsKey,
    /// `HistoryLimits::events`.
    HistoryEvents,
    /// `HistoryLimits::retention`.
    HistoryRetention,
    /// `Request::limit`.
    Limit,
    /// `Request::min_hold`.
    MinHold,
    /// `Release::min_hold`.
    ReleaseMinHold,
    /// `Request::supersede`.
    Supersede,
    /// `Request::priority`.
    Priority,
    /// `Wait::No`.
    WaitNo,
    /// `Wait::For(0)`.
    WaitZero,
    /// A read-write lock's modes, `Mode::Read` and `Mode::Write`.
    ReadWrite,
    /// `Watched::caller`.
    KeepCaller,
    /// `Watched::pid`.
    KeepPid,
    /// The token given to `owner_token`.
    OwnerToken,
}

impl Setting {
    /// The library's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Setting::Urls => "ConnectOptions::urls",
            Setting::ConnectTimeout => "ConnectOptions::connect_timeout",
            Setting::Cluster => "ConnectOptions::cluster",
            Setting::Sentinel => "ConnectOptions::sentinel",
            Setting::MinReplicas => "ConnectOptions::min_replicas",
            Setting::TlsCa => "Tls::ca",
            Setting::TlsCert => "Tls::cert",
            Setting::TlsKey => "Tls::key",
            Setting::HistoryEvents => "HistoryLimits::events",
            Setting::HistoryRetention => "HistoryLimits::retention",
            Setting::Limit => "Request::limit",
            Setting::MinHold => "Request::min_hold",
            Setting::ReleaseMinHold => "Release::min_hold",
            Setting::Supersede => "Request::supersede",
            Setting::Priority => "Request::priority",
            Setting::WaitNo => "Wait::No",
            Setting::WaitZero => "Wait::For(0)",
            Setting::ReadWrite => "Mode::Read or Mode::Write",
            Setting::KeepCaller => "Watched::caller",
            Setting::KeepPid => "Watched::pid",
            Setting::OwnerToken => "owner_token's flag",
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One part of a [`Message`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Words, the same in every front end.
    Text(String),
    /// A setting, named by the front end.
    Setting(Setting),
}

impl From<&str> for Part {
    fn from(t: &str) -> Part {
        Part::Text(t.to_string())
    }
}

impl From<String> for Part {
    fn from(t: String) -> Part {
        Part::Text(t)
    }
}

impl From<Setting> for Part {
    fn from(s: Setting) -> Part {
        Part::Setting(s)
    }
}

/// An error's text, made of words and [`Setting`]s. Display uses the
/// library's names; [`Message::render`] a front end's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Message(pub Vec<Part>);

impl Message {
    /// This message followed by `more`.
    pub fn and(mut self, more: impl Into<Message>) -> Message {
        self.0.extend(more.into().0);
        self
    }

    /// The text with each setting named by `name`.
    pub fn render(&self, name: &dyn Fn(Setting) -> String) -> String {
        self.0
            .iter()
            .map(|p| match p {
                Part::Text(t) => t.clone(),
                Part::Setting(s) => name(*s),
            })
            .collect()
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(&|s| s.name().to_string()))
    }
}

impl From<Setting> for Message {
    fn from(s: Setting) -> Message {
        Message(vec![s.into()])
    }
}

impl From<&str> for Message {
    fn from(t: &str) -> Message {
        Message(vec![t.into()])
    }
}

impl From<String> for Message {
    fn from(t: String) -> Message {
        Message(vec![t.into()])
    }
}

/// A [`Message`] of parts, each a `&str`, a `String` or a [`Setting`]:
/// `msg![Setting::Limit, " must be at least 1"]`.
#[macro_export]
macro_rules! msg {
    ($($part:expr),* $(,)?) => {
        $crate::error::Message(vec![$($crate::error::Part::from($part)),*])
    };
}
