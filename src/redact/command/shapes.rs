//! Secrets found by their shape rather than by the word before them:
//! values of JSON keys with a secret name, and well-known token formats.

use super::secret_name;

/// Token prefixes hidden wherever they appear, and how many characters
/// (of `[A-Za-z0-9_-]`) at least follow them in a real token.
const TOKEN_PREFIXES: &[(&str, usize)] = &[
    ("github_pat_", 20),
    ("ghp_", 20),
    ("gho_", 20),
    ("ghu_", 20),
    ("ghs_", 20),
    ("ghr_", 20),
    ("glpat-", 20),
    ("xoxb-", 10),
    ("xoxp-", 10),
    ("xoxa-", 10),
    ("xoxr-", 10),
    ("xoxs-", 10),
    ("AKIA", 16),
    ("ASIA", 16),
];

/// `s` with the value of every JSON key with a secret name (see
/// [`super::SECRET_NAMES`]) replaced by `"***"`: `{"password": "x"}` gives
/// `{"password": "***"}`. A string, number or literal is replaced; an
/// object or array is left for its own keys to be looked at.
pub(super) fn hide_json(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains("\":") && !s.contains("\" :") {
        return s.into();
    }
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'"' {
            let next = s[i..].find('"').map_or(s.len(), |n| i + n);
            out.push_str(&s[i..next]);
            i = next;
            continue;
        }
        let end = string_end(b, i);
        out.push_str(&s[i..end]);
        let key = &s[i + 1..end.saturating_sub(1).max(i + 1)];
        i = end;
        // `"key"`, blanks, `:`, blanks, then the value.
        let mut j = i;
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        if j >= b.len() || b[j] != b':' || !secret_name(key) {
            continue;
        }
        j += 1;
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        let value_end = match b.get(j) {
            Some(b'"') => string_end(b, j),
            Some(b'{' | b'[') | None => continue,
            Some(_) => s[j..]
                .find([',', '}', ']', ' ', '\n'])
                .map_or(s.len(), |n| j + n),
        };
        out.push_str(&s[i..j]);
        out.push_str("\"***\"");
        i = value_end;
    }
    out.into()
}

/// Where the JSON string starting at `b[start]` (a `"`) ends: after its
/// closing quote, or at the end of `b`.
fn string_end(b: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// `s` with every token of [`TOKEN_PREFIXES`] hidden after its prefix
/// (`ghp_***`). A prefix counts at the start of `s` or after a character
/// that cannot be part of a token, followed by at least its length of
/// token characters.
pub(super) fn hide_tokens(s: &str) -> String {
    let token_char = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'-';
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        let boundary = i == 0 || !token_char(b[i - 1]);
        let hit = boundary
            .then(|| {
                TOKEN_PREFIXES.iter().find_map(|(p, min)| {
                    let rest = b[i..].strip_prefix(p.as_bytes())?;
                    let n = rest.iter().take_while(|c| token_char(**c)).count();
                    (n >= *min).then_some((p.len(), n))
                })
            })
            .flatten();
        match hit {
            Some((p, n)) => {
                out.push_str(&s[copied..i + p]);
                out.push_str("***");
                i += p + n;
                copied = i;
            }
            None => i += 1,
        }
    }
    out.push_str(&s[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    fn cmd(args: &[&str]) -> String {
        super::super::redact_command(&args.iter().map(OsString::from).collect::<Vec<_>>())
    }

    #[test]
    fn json_bodies() {
        assert_eq!(
            cmd(&["curl", "-d", r#"{"user":"bob","password":"hunter2"}"#, "u"]),
            r#"curl -d {"user":"bob","password":"***"} u"#
        );
        assert_eq!(
            cmd(&["curl", "-d", r#"{"auth": {"token": "two words", "n": 1}}"#]),
            r#"curl -d {"auth": {"token": "***", "n": 1}}"#
        );
        assert_eq!(
            cmd(&["x", r#"{"api_key": 12345, "pin": "x\"y"}"#]),
            r#"x {"api_key": "***", "pin": "x\"y"}"#
        );
        assert_eq!(
            cmd(&["sh", "-c", r#"curl -d '{"secret":"hunter2"}' u"#]),
            r#"sh -c curl -d '{"secret":"***"}' u"#
        );
        assert_eq!(
            cmd(&["x", r#"{"name":"bob","id":3}"#]),
            r#"x {"name":"bob","id":3}"#
        );
    }

    #[test]
    fn tokens_anywhere() {
        let gh = format!("ghp_{}", "A1b2".repeat(9));
        let pat = format!("github_pat_{}", "x9".repeat(40));
        let gl = "glpat-abcdefghij0123456789";
        let slack = "xoxb-123456789012-123456789012-abcdefABCDEF";
        let aws = "AKIAIOSFODNN7EXAMPLE";
        for (arg, shown) in [
            (gh.as_str(), "ghp_***"),
            (pat.as_str(), "github_pat_***"),
            (gl, "glpat-***"),
            (slack, "xoxb-***"),
            (aws, "AKIA***"),
        ] {
            assert_eq!(cmd(&["x", arg]), format!("x {shown}"), "{arg}");
            assert_eq!(
                cmd(&["x", &format!("--opt=k:{arg},y")]),
                format!("x --opt=k:{shown},y"),
                "{arg}"
            );
            assert_eq!(
                cmd(&["sh", "-c", &format!("echo \"{arg}\" | x")]),
                format!("sh -c echo \"{shown}\" | x"),
                "{arg}"
            );
        }
        // Too short, or inside a longer word: not a token.
        assert_eq!(
            cmd(&["x", "ghp_test", "XAKIAIOSFODNN7EXAMPLE", "AKIA12"]),
            "x ghp_test XAKIAIOSFODNN7EXAMPLE AKIA12"
        );
    }
}
