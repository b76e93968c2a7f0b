//! An error's one line on stderr: what the library says, with what to do
//! about it, in the command line's terms; and clap's own errors.

use std::io::Write;

use rlock::exit_code;

/// An error's one line, with what to do about it where the library's
/// words alone leave a new user stuck.
pub(crate) fn explain(lib: Option<&rlock::Error>, text: &str, prefix: &str) -> String {
    let Some(e) = lib else {
        return text.to_string();
    };
    let text = &cli_terms(text);
    match e {
        // Not after an outage a wait rode out: that Redis did run there.
        rlock::Error::Unavailable { cause, context }
            if cause.kind() == redis::ErrorKind::Io
                && text.contains("Connection refused")
                && !context.contains(" has not answered since ") =>
        {
            format!(
                "{text}; is Redis running there? --url URL (or RLOCK_URL) points rlock at another"
            )
        }
        rlock::Error::Unavailable { cause, .. } if cause.code() == Some("NOPERM") => format!(
            "{text}; the user's ACL must allow the keys under --prefix {prefix:?} (~{prefix}*) \
             and rlock's commands (docs/deployments.md: \"TLS and least-privilege ACLs\")"
        ),
        // WAIT's shortfall (`--min-replicas`): redis-rs' own words for the
        // made-up cause ("too few replicas - Client") say nothing more.
        rlock::Error::Unavailable { cause, .. }
            if cause.kind() == redis::ErrorKind::Client && text.ends_with(" - Client") =>
        {
            let text = text.trim_end_matches(" - Client");
            format!("{text}; are the replicas connected? (`rlock doctor` checks)")
        }
        rlock::Error::Protocol(_) if text.contains("Parse error") => {
            "the server did not answer as Redis does (the URL may point at another \
             service's port; check --url or RLOCK_URL)"
                .to_string()
        }
        _ => text.to_string(),
    }
}

/// The library's errors name its own fields and values; a user of the
/// command line knows them as flags.
pub(crate) fn cli_terms(text: &str) -> String {
    const TERMS: [(&str, &str); 22] = [
        ("give one (owner_token's flag)", "give --token TOKEN"),
        (
            "a read-write lock (Mode::Read or Mode::Write)",
            "a read-write lock (rlock rw, exec -s)",
        ),
        (
            "connect with ConnectOptions::cluster",
            "give --cluster (RLOCK_CLUSTER=1)",
        ),
        ("ConnectOptions::connect_timeout", "--connect-timeout"),
        ("ConnectOptions::min_replicas", "--min-replicas"),
        ("ConnectOptions::sentinel", "--sentinel"),
        ("ConnectOptions::cluster", "--cluster"),
        ("Tls::cert", "--tls-cert"),
        ("Tls::key", "--tls-key"),
        ("Tls::ca", "--tls-ca"),
        ("Watched::caller", "--keep"),
        ("Watched::pid", "--keep-while"),
        ("release_with's min_hold", "--min-hold"),
        ("HistoryLimits::retention", "--history-retention"),
        ("HistoryLimits::events", "--history-events"),
        ("Request::min_hold", "--min-hold"),
        ("Request::supersede", "--supersede"),
        ("Request::priority", "--priority"),
        ("Request::limit", "--limit"),
        ("ConnectOptions::urls", "--url"),
        ("Wait::No", "-n"),
        ("Wait::For(0)", "-w 0"),
    ];
    TERMS
        .iter()
        .fold(text.to_string(), |t, (lib, flag)| t.replace(lib, flag))
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
