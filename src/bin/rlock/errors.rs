//! An error's one line on stderr: what the library says, with what to do
//! about it, in the command line's terms; and clap's own errors.

use std::io::Write;

use rlock::error::Setting;
use rlock::exit_code;

/// An error's one line: each cause in turn, the library's in the command
/// line's terms ([`flag`]), then what to do about it where the library's
/// words alone leave a new user stuck.
pub(crate) fn line(err: &anyhow::Error, prefix: &str) -> String {
    let lib = err.chain().find_map(|e| e.downcast_ref::<rlock::Error>());
    let text: Vec<String> = err
        .chain()
        .map(|e| match e.downcast_ref::<rlock::Error>() {
            Some(e) => e.render(&flag),
            None => e.to_string(),
        })
        .collect();
    // One line, even when a cause spans several (redis-rs' parse errors
    // on a server that is not Redis do).
    let text = text.join(": ");
    let text: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let text = text.join(" ");
    match lib.map(|e| hint(e, prefix)).unwrap_or_default() {
        h if h.is_empty() => text,
        h => format!("{text}; {h}"),
    }
}

/// What to do about `e`, if its words do not say.
fn hint(e: &rlock::Error, prefix: &str) -> String {
    match e {
        // Not after an outage a wait rode out (`since`): Redis did run there.
        rlock::Error::Unavailable {
            cause, since: None, ..
        } if cause.is_connection_refusal() => {
            "is Redis running there? --url URL (or RLOCK_URL) points rlock at another".into()
        }
        // A break's says what it needs itself (the operator role).
        rlock::Error::NoPermission { needs: None, .. } => format!(
            "the user's ACL must allow the keys under --prefix {prefix:?} (~{prefix}{{* for a \
             job) and rlock's commands (docs/deployments.md#roles)"
        ),
        e if e.replicas_short() => "are the replicas connected? (`rlock doctor` checks)".into(),
        _ => String::new(),
    }
}

/// What the command line calls a setting the library names.
pub(crate) fn flag(s: Setting) -> String {
    match s {
        Setting::Urls => "--url",
        Setting::ConnectTimeout => "--connect-timeout",
        Setting::Cluster => "--cluster",
        Setting::Sentinel => "--sentinel",
        Setting::MinReplicas => "--min-replicas",
        Setting::TlsCa => "--tls-ca",
        Setting::TlsCert => "--tls-cert",
        Setting::TlsKey => "--tls-key",
        Setting::HistoryEvents => "--history-events",
        Setting::HistoryRetention => "--history-retention",
        Setting::Limit => "--limit",
        Setting::MinHold | Setting::ReleaseMinHold => "--min-hold",
        Setting::Supersede => "--supersede",
        Setting::Priority => "--priority",
        Setting::WaitNo => "-n",
        Setting::WaitZero => "-w 0",
        Setting::ReadWrite => "rlock rw, exec -s",
        Setting::KeepCaller => "--keep",
        Setting::KeepPid => "--keep-while",
        Setting::OwnerToken => "--token TOKEN",
        other => return other.name().to_string(),
    }
    .to_string()
}

/// Help and version go to stdout with 0; every usage error is one line on
/// stderr with exit code 64 (clap's own default would be 2).
pub(crate) fn clap_exit(e: clap::Error) -> u8 {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return exit_code::OK;
    }
    // clap's message spans several lines (error, details, usage); keep the
    // part before the usage block, folded into one line.
    let text = e.to_string();
    let line: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
        .collect();
    // It may quote what was typed, a URL with a password included.
    let line = rlock::conn::redact_text(&line.join(" "));
    say!(
        "rlock: {} (see rlock --help)",
        line.trim_start_matches("error: ")
    );
    exit_code::USAGE
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlock::msg;

    #[test]
    fn the_library_settings_read_as_flags_with_a_hint() {
        let e = rlock::Error::Invalid(msg![Setting::Limit, " must be at least 1"]);
        assert_eq!(line(&e.into(), "rlock:"), "--limit must be at least 1");
        let refused =
            redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let e = anyhow::Error::from(rlock::Error::Unavailable {
            context: "cannot use Redis at h:1".into(),
            cause: refused,
            since: None,
        })
        .context("status \"k\"");
        let l = line(&e, "rlock:");
        assert!(
            l.starts_with("status \"k\": cannot use Redis at h:1: "),
            "{l}"
        );
        assert!(
            l.ends_with(
                "; is Redis running there? --url URL (or RLOCK_URL) points rlock at another"
            ),
            "{l}"
        );
    }
}
