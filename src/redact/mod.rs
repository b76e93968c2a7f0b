//! Keeping secrets out of what rlock shows and stores: URLs with their
//! passwords hidden (here), and command lines, stored with a lock for
//! `rlock status`, with every password, token and credential replaced by
//! `***` (`command.rs`). Nothing here connects to anything;
//! [`crate::conn`] re-exports these functions, where they have always
//! been reachable.

mod command;

pub use command::redact_command;

/// The URL with any user:password replaced by `***`. Passwords may hold
/// characters a URL should have escaped (`/`, `?`, `@`), so everything up to
/// the last `@` counts as credentials; what does not look like a URL at all
/// is not echoed if it holds an `@`. A query string (`?pass=...` works for
/// unix sockets) is hidden too.
pub fn redact(url: &str) -> String {
    let hidden = match (url.split_once("://"), url.rfind('@')) {
        (_, None) => url.to_string(),
        (Some((scheme, rest)), Some(_)) => match rest.rfind('@') {
            Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
            None => "<redacted URL>".to_string(),
        },
        (None, Some(_)) => "<redacted URL>".to_string(),
    };
    match hidden.split_once('?') {
        Some((base, _)) => format!("{base}?***"),
        None => hidden,
    }
}

/// `text` with every word that looks like a URL redacted (for messages
/// that may quote what the user typed, like clap's).
pub fn redact_text(text: &str) -> String {
    text.split(' ')
        .map(|w| {
            if w.contains("://") || w.contains('@') {
                let t = w.trim_matches(|c| c == '\'' || c == '"');
                w.replace(t, &redact(t))
            } else {
                w.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
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
        assert_eq!(redact("unix:///x.sock?pass=hunter2"), "unix:///x.sock?***");
        assert_eq!(
            redact_text("unexpected argument 'redis://:hunter2@h' found"),
            "unexpected argument 'redis://***@h' found"
        );
    }

    #[test]
    fn redacts_every_kind_of_url() {
        for (url, shown) in [
            ("rediss://u:pw@h:6380/0", "rediss://***@h:6380/0"),
            ("redis://:pw@[::1]:6380", "redis://***@[::1]:6380"),
            ("redis://:pw@h#insecure", "redis://***@h#insecure"),
            (
                "rediss://u:pw@h:1/0?protocol=resp3",
                "rediss://***@h:1/0?***",
            ),
            (
                "redis+unix:///s.sock?db=1&pass=pw",
                "redis+unix:///s.sock?***",
            ),
            ("redis://h:1/0?protocol=resp3", "redis://h:1/0?***"),
            ("redis://h:1", "redis://h:1"),
            ("unix:///run/redis.sock", "unix:///run/redis.sock"),
        ] {
            assert_eq!(redact(url), shown, "{url}");
        }
    }

    #[test]
    fn redact_text_hides_urls_inside_messages() {
        assert_eq!(
            redact_text("cannot use \"rediss://:hunter2@h:1\". retry"),
            "cannot use \"rediss://***@h:1\". retry"
        );
        assert_eq!(
            redact_text("a redis://:x@a and redis://:y@b"),
            "a redis://***@a and redis://***@b"
        );
        // Not a URL, but credentials: not echoed at all.
        assert_eq!(
            redact_text("bad value u:hunter2@h"),
            "bad value <redacted URL>"
        );
        assert_eq!(redact_text("nothing to hide"), "nothing to hide");
    }
}
