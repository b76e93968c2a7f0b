//! Command lines with their secrets hidden: see [`redact_command`].

use std::ffi::OsString;

use super::redact;

/// `argv` as one line safe to store in Redis and show in `rlock status`:
/// the arguments joined with spaces, secrets replaced by `***`, and cut to
/// 200 characters plus `...` (after redacting, so a cut never leaves half a
/// password in view). Hidden are:
///
/// - a URL's user and password, and its query string (see [`redact`]),
///   also inside an argument (`--url=redis://u:p@h` gives
///   `--url=redis://***@h`); and `user:password@host` without a scheme;
/// - the value of `NAME=value` or `--flag=value` whose name contains, in any
///   case, PASSWORD, PASSWD, PASS, SECRET, TOKEN, AUTH, CREDENTIAL, APIKEY,
///   API_KEY or PRIVATE (`-` counts as `_`): `RLOCK_PASSWORD=***`. When the
///   whole argument is one such assignment, all of it after `=` is hidden,
///   spaces included;
/// - the argument after a flag that takes a secret: a flag named, or ending
///   in, password, passwd, secret, token, apikey, api-key, private-key,
///   credential(s); one named `pass` or `auth` or ending in `-pass`/`-auth`;
///   redis-server's `--requirepass` and `--masterauth`; openssl's `-passin`
///   and `-passout`; and `-a`, but only after redis-cli (or
///   redis-benchmark, or valkey's and keydb's), as `-a` means something
///   harmless to most programs (`cp -a`). `--no-...` flags take no value.
///   Likewise a password glued to `-p` (`-p***`) after mysql (or
///   mariadb, and their mysqldump, mysqladmin... tools), whose `-p` takes
///   its password only that way (`mysql -p db`: db is a database), and
///   `-p` of sshpass, glued or not;
///   The match is stricter than for `NAME=value` because a flag that takes
///   no value would hide an innocent argument;
/// - after redis-cli (and the like), every word after AUTH or AUTH2, user
///   names included (`redis-cli AUTH *** ***`; also in `HELLO 3 AUTH ...`
///   and `MIGRATE ... AUTH2 ...`), and the word after `requirepass` or
///   `masterauth` (`CONFIG SET masterauth ***`);
/// - the value of an HTTP header with such a name (`Authorization: ***`,
///   also after `Bearer` and the like).
///
/// A shell command in one argument (the one after `-c`, as in `sh -c '...'`
/// or `bash -lc '...'`) is read word by word with the same rules; its
/// quoting is not parsed, so a quoted secret with spaces in it can show past
/// its first word. The rules err on the side of hiding: `AUTHOR=x` is shown
/// as `AUTHOR=***`, and `ssh h 'PGPASSWORD=x psql'` as `ssh h PGPASSWORD=***`.
pub fn redact_command(argv: &[OsString]) -> String {
    let mut words = Words::default();
    let line = argv
        .iter()
        .map(|a| words.arg(&a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ");
    match line.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &line[..i]),
        None => line,
    }
}

/// Names (of variables, `--flag=`s, headers) whose value is a secret when
/// they contain one of these.
const SECRET_NAMES: &[&str] = &[
    "PASSWORD",
    "PASSWD",
    "PASS",
    "SECRET",
    "TOKEN",
    "AUTH",
    "CREDENTIAL",
    "APIKEY",
    "API_KEY",
    "PRIVATE",
];

/// Flags ending in one of these take a secret as the next argument.
const SECRET_FLAG_ENDINGS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "api-key",
    "private-key",
    "credential",
    "credentials",
];

/// Flags named one of these, or ending in `-` and one of these, do too
/// (`--bypass` and `--oauth` do not).
const SECRET_FLAG_WORDS: &[&str] = &["pass", "auth"];

/// And these flags, whole.
const SECRET_FLAGS: &[&str] = &["requirepass", "masterauth", "passin", "passout"];

/// Programs whose `-a` is a password.
const REDIS_TOOLS: &[&str] = &[
    "redis-cli",
    "redis-benchmark",
    "valkey-cli",
    "valkey-benchmark",
    "keydb-cli",
    "keydb-benchmark",
];

/// Programs whose `-pPASSWORD` (glued: a separate word is no password)
/// is a password.
const MYSQL_TOOLS: &[&str] = &[
    "mysql",
    "mysqldump",
    "mysqladmin",
    "mysqlcheck",
    "mysqlimport",
    "mysqlshow",
    "mysqlpump",
    "mysqlbinlog",
    "mysqlslap",
    "mysqlsh",
    "mariadb",
    "mariadb-dump",
    "mariadb-admin",
    "mariadb-check",
    "mariadb-import",
    "mariadb-show",
    "mariadb-binlog",
    "mariadb-slap",
];

/// Words that, after a redis-cli, start a command's credentials: AUTH
/// [user] password, HELLO 3 AUTH user password, MIGRATE ... AUTH
/// password or AUTH2 user password. What follows them is hidden.
const REDIS_AUTH: &[&str] = &["auth", "auth2"];

/// Settings whose value is a password (CONFIG SET masterauth ...).
const REDIS_SECRET_CONFIGS: &[&str] = &["requirepass", "masterauth"];

/// Authorization schemes written before the secret in a header value.
const AUTH_SCHEMES: &[&str] = &["bearer", "basic", "digest", "token", "negotiate"];

/// What [`redact_command`] has seen so far.
#[derive(Default)]
struct Words {
    hide: Hide,
    /// The last argument was `-c` (or `-lc`...): this one is a shell
    /// command.
    script: bool,
    /// A redis-cli came before: its `-a` takes a password.
    redis_tool: bool,
    /// A mysql (or the like) came before: its `-pPASSWORD` is one.
    mysql_tool: bool,
    /// An sshpass came before: its `-p` takes a password, glued or not.
    sshpass: bool,
}

#[derive(Default, PartialEq)]
enum Hide {
    #[default]
    No,
    /// The next word or argument is a secret.
    Next,
    /// Every later word and argument: the credentials of a Redis command
    /// (`redis-cli AUTH user password`).
    Rest,
    /// The next word is a header's value: a secret, or an authorization
    /// scheme with the secret after it.
    Header,
}

impl Words {
    fn arg(&mut self, arg: &str) -> String {
        // `-c`, or `-lc`, `-ec`: the shell's flag for a command.
        let shell_flag = arg
            .strip_prefix('-')
            .is_some_and(|f| f.ends_with('c') && f.chars().all(|c| c.is_ascii_lowercase()));
        let script = std::mem::replace(&mut self.script, shell_flag);
        if self.hide == Hide::Rest {
            return "***".into();
        }
        if self.hide != Hide::No {
            self.hide = Hide::No;
            return "***".into();
        }
        // One assignment or header is hidden whole, spaces and all; not
        // a shell command that starts with one.
        if let Some((name, _)) = arg.split_once('=').filter(|_| !script)
            && secret_name(name.trim_start_matches('-'))
        {
            return format!("{name}=***");
        }
        if let Some((name, value)) = arg.split_once(':').filter(|_| !script)
            && value.starts_with(char::is_whitespace)
            && secret_name(name)
        {
            return format!("{name}: ***");
        }
        let mut out = String::with_capacity(arg.len());
        let mut rest = arg;
        while !rest.is_empty() {
            let space = rest.len() - rest.trim_start().len();
            out.push_str(&rest[..space]);
            rest = &rest[space..];
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            if end > 0 {
                out.push_str(&self.word(&rest[..end]));
            }
            rest = &rest[end..];
        }
        out
    }

    fn word(&mut self, w: &str) -> String {
        let bare = w.trim_matches(['\'', '"']);
        match self.hide {
            Hide::No => {}
            Hide::Rest => return "***".into(),
            Hide::Next => {
                self.hide = Hide::No;
                return "***".into();
            }
            Hide::Header => {
                let scheme = AUTH_SCHEMES.iter().any(|s| bare.eq_ignore_ascii_case(s));
                self.hide = if scheme { Hide::Next } else { Hide::No };
                return "***".into();
            }
        }
        let program = bare.rsplit('/').next().unwrap_or(bare);
        if REDIS_TOOLS.contains(&program) {
            self.redis_tool = true;
        }
        if MYSQL_TOOLS.contains(&program) {
            self.mysql_tool = true;
        }
        if program == "sshpass" {
            self.sshpass = true;
        }
        if (self.mysql_tool || self.sshpass)
            && let Some(pw) = bare.strip_prefix("-p")
            && !pw.is_empty()
        {
            return "-p***".into();
        }
        if self.sshpass && bare == "-p" {
            self.hide = Hide::Next;
            return w.into();
        }
        if self.redis_tool {
            if REDIS_AUTH.iter().any(|c| bare.eq_ignore_ascii_case(c)) {
                self.hide = Hide::Rest;
                return w.into();
            }
            if REDIS_SECRET_CONFIGS
                .iter()
                .any(|c| bare.eq_ignore_ascii_case(c))
            {
                self.hide = Hide::Next;
                return w.into();
            }
        }
        if self.takes_secret(bare) {
            self.hide = Hide::Next;
            return w.into();
        }
        if let Some(name) = bare.strip_suffix(':')
            && secret_name(name)
        {
            self.hide = Hide::Header;
            return w.into();
        }
        if let Some((name, value)) = w.split_once('=') {
            let bare = name.trim_start_matches(['\'', '"', '-']);
            if is_name(bare) {
                if secret_name(bare) {
                    return format!("{name}=***");
                }
                return format!("{name}={}", redact_value(value));
            }
        }
        redact_value(w)
    }

    /// Whether `w` is a flag whose value, in the next word, is a secret.
    fn takes_secret(&self, w: &str) -> bool {
        let Some(flag) = w.strip_prefix('-') else {
            return false;
        };
        if flag == "a" {
            return self.redis_tool;
        }
        let name = flag
            .trim_start_matches('-')
            .to_ascii_lowercase()
            .replace('_', "-");
        if name.len() < 2 || !is_name(&name) || name.starts_with("no-") {
            return false;
        }
        SECRET_FLAGS.contains(&name.as_str())
            || SECRET_FLAG_ENDINGS.iter().any(|e| name.ends_with(e))
            || SECRET_FLAG_WORDS
                .iter()
                .any(|e| name == *e || name.ends_with(&format!("-{e}")))
    }
}

/// A variable, flag or header name (nothing that could be a URL or a path).
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

fn secret_name(name: &str) -> bool {
    let name = name.to_ascii_uppercase().replace('-', "_");
    is_name(&name) && SECRET_NAMES.iter().any(|s| name.contains(s))
}

/// A URL redacted; `user:password@host` without a scheme too.
fn redact_value(v: &str) -> String {
    if v.contains("://") {
        return redact(v);
    }
    match v.rfind('@') {
        Some(at) if v[..at].contains(':') => format!("***{}", &v[at..]),
        _ => v.into(),
    }
}

// The tests are many (one per way a secret reaches a command line):
// they have a file of their own.
#[cfg(test)]
mod tests;
