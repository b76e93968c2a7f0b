//! Command lines with their secrets hidden: see [`redact_command`].

use std::ffi::OsString;

use super::redact;
use shapes::{hide_json, hide_tokens};

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
///   `-p` of sshpass, glued or not; `-p` after `docker login` (or podman,
///   nerdctl, buildah, skopeo, helm, oras: their `login`); and `-pw`
///   (PuTTY's pscp, plink, psftp). The match is stricter than for `NAME=value` because a flag that takes
///   no value would hide an innocent argument;
/// - after redis-cli (and the like), every word after AUTH or AUTH2, user
///   names included (`redis-cli AUTH *** ***`; also in `HELLO 3 AUTH ...`
///   and `MIGRATE ... AUTH2 ...`), and the word after `requirepass` or
///   `masterauth` (`CONFIG SET masterauth ***`);
/// - the value of an HTTP header with such a name, COOKIE included
///   (`Authorization: ***`, also after `Bearer` and the like), with or
///   without a space after the colon (`Authorization:***` for
///   Authorization, Proxy-Authorization, Cookie and `X-` headers with such
///   a name), also as a setting's value
///   (`http.extraHeader=Authorization: ***`);
/// - curl's credentials: the password of `-u`/`--user` and
///   `-U`/`--proxy-user` (`admin:***`), and its cookies (`-b ***`,
///   `--cookie ***`); the password of a Samba tool's `-U`/`--user`
///   (`smbclient -U bob%***`);
/// - in a list of options or form fields (`,` or `&` between them), each
///   `name=value` with such a name (`mount -o username=b,password=***`);
/// - in JSON, the value of each key with such a name
///   (`-d {"password":"***"}`);
/// - anywhere, tokens shaped like GitHub's (`ghp_`, `gho_`, `ghu_`,
///   `ghs_`, `ghr_`, `github_pat_`), GitLab's (`glpat-`), Slack's
///   (`xoxb-`, `xoxp-`, `xoxa-`, `xoxr-`, `xoxs-`) and AWS access key ids
///   (`AKIA`, `ASIA`): the prefix stays, the rest is `***`.
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
    "COOKIE",
    // MYSQL_PWD, DB_PWD (not PWD or OLDPWD, the working directory).
    "_PWD",
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
    "passphrase",
    "cookie",
];

/// Flags named one of these, or ending in `-` and one of these, do too
/// (`--bypass` and `--oauth` do not).
const SECRET_FLAG_WORDS: &[&str] = &["pass", "auth"];

/// And these flags, whole.
const SECRET_FLAGS: &[&str] = &["requirepass", "masterauth", "passin", "passout", "pw"];

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

/// Programs whose `-u`/`--user` and `-U`/`--proxy-user` take
/// `user:password`, and whose `-b` takes cookies.
const CURL_TOOLS: &[&str] = &["curl"];

/// Programs whose `-U`/`--user` take `user%password` (Samba's).
const SAMBA_TOOLS: &[&str] = &[
    "smbclient",
    "rpcclient",
    "smbcacls",
    "smbcquotas",
    "smbget",
    "smbtree",
    "net",
];

/// Programs whose `login` takes a password with `-p`.
const REGISTRY_TOOLS: &[&str] = &[
    "docker", "podman", "nerdctl", "buildah", "skopeo", "helm", "oras",
];

/// Header names whose value is a secret even with no space after the
/// colon (`Authorization:Bearer x`); a looser match would take
/// `auth-server:443` for one.
const TIGHT_HEADERS: &[&str] = &["authorization", "proxy-authorization", "cookie"];

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
    /// A curl came before (see [`CURL_TOOLS`]).
    curl: bool,
    /// A Samba tool came before (see [`SAMBA_TOOLS`]).
    samba: bool,
    /// A docker (or the like) came before, and its `login` after it.
    registry: bool,
    registry_login: bool,
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
    /// The next word is `user<sep>password`: the password is hidden.
    Userinfo(char),
}

impl Words {
    fn arg(&mut self, arg: &str) -> String {
        let out = self.arg_rules(&hide_json(arg));
        hide_tokens(&out)
    }

    fn arg_rules(&mut self, arg: &str) -> String {
        // `-c`, or `-lc`, `-ec`: the shell's flag for a command.
        let shell_flag = arg
            .strip_prefix('-')
            .is_some_and(|f| f.ends_with('c') && f.chars().all(|c| c.is_ascii_lowercase()));
        let script = std::mem::replace(&mut self.script, shell_flag);
        if self.hide == Hide::Rest {
            return "***".into();
        }
        if let Hide::Userinfo(sep) = self.hide {
            self.hide = Hide::No;
            return hide_password(arg, sep);
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
        if !script && let Some(h) = tight_header(arg) {
            return h;
        }
        // A setting whose value is such a header (git's
        // `http.extraHeader=Authorization: Bearer x`, curl's
        // `--header=...`).
        if let Some((name, value)) = arg.split_once('=').filter(|_| !script)
            && is_name(name.trim_start_matches('-'))
            && let Some((header, v)) = value.split_once(':')
            && secret_name(header)
            && (v.starts_with(char::is_whitespace) || tight_header(value).is_some())
        {
            return format!(
                "{name}={header}:{}***",
                if v.starts_with(' ') { " " } else { "" }
            );
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
            Hide::Userinfo(sep) => {
                self.hide = Hide::No;
                return hide_password(w, sep);
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
        self.curl |= CURL_TOOLS.contains(&program);
        self.samba |= SAMBA_TOOLS.contains(&program);
        self.registry |= REGISTRY_TOOLS.contains(&program);
        self.registry_login |= self.registry && bare == "login";
        if let Some(out) = self.userinfo_flag(bare) {
            return out;
        }
        if (self.curl && bare == "-b") || (self.registry_login && bare == "-p") {
            self.hide = Hide::Next;
            return w.into();
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
        if let Some(out) = self.header_word(w) {
            return out;
        }
        if let Some(out) = hide_options(w) {
            return out;
        }
        if let Some((name, value)) = w.split_once('=')
            && is_name(name.trim_start_matches(['\'', '"', '-']))
            && let Some(out) = self.header_word(value)
        {
            return format!("{name}={out}");
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

    /// A curl's or Samba tool's user flag: the password in its value (the
    /// next word, or glued: `-uadmin:pw`, `--user=bob%pw`) is hidden.
    fn userinfo_flag(&mut self, w: &str) -> Option<String> {
        let (flags, sep): (&[&str], char) = if self.curl {
            (&["-u", "--user", "-U", "--proxy-user"], ':')
        } else if self.samba {
            (&["-U", "--user"], '%')
        } else {
            return None;
        };
        if let Some((flag, v)) = w.split_once('=')
            && flags.contains(&flag)
        {
            return Some(format!("{flag}={}", hide_password(v, sep)));
        }
        if flags.contains(&w) {
            self.hide = Hide::Userinfo(sep);
            return Some(w.into());
        }
        // Glued to a short flag: `-uadmin:pw`, `-Ubob%pw`.
        let flag = flags
            .iter()
            .find(|f| f.len() == 2 && w.len() > 2 && w.starts_with(**f))?;
        Some(format!("{flag}{}", hide_password(&w[2..], sep)))
    }

    /// A word that is, or starts, a header with a secret: `Name:` whose
    /// value is the next word (after quotes: `'Authorization:`), or
    /// `Authorization:value` with no space (see [`TIGHT_HEADERS`]).
    fn header_word(&mut self, w: &str) -> Option<String> {
        let bare = w.trim_start_matches(['\'', '"']);
        let quotes = &w[..w.len() - bare.len()];
        let (name, value) = bare.split_once(':')?;
        if !secret_name(name) {
            return None;
        }
        if value.trim_matches(['\'', '"']).is_empty() {
            self.hide = Hide::Header;
            return Some(w.into());
        }
        let out = tight_header(bare)?;
        let v = value.trim_matches(['\'', '"']);
        if AUTH_SCHEMES.iter().any(|s| v.eq_ignore_ascii_case(s)) {
            self.hide = Hide::Next;
        }
        Some(format!("{quotes}{out}"))
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

/// `Authorization:value` (no space needed) as `Authorization:***`, for
/// the header names of [`TIGHT_HEADERS`] and `X-` headers with a secret
/// name.
fn tight_header(arg: &str) -> Option<String> {
    let (name, value) = arg.split_once(':')?;
    let lower = name.to_ascii_lowercase();
    let tight =
        TIGHT_HEADERS.contains(&lower.as_str()) || (lower.starts_with("x-") && secret_name(name));
    (tight && !value.is_empty() && !value.starts_with(char::is_whitespace))
        .then(|| format!("{name}:***"))
}

/// `user<sep>password` with the password hidden; without `sep`, as is (a
/// user name alone: the program asks for the password).
fn hide_password(v: &str, sep: char) -> String {
    match v.split_once(sep) {
        Some((user, _)) => format!("{user}{sep}***"),
        None => v.into(),
    }
}

/// A list of options or form fields (`a=1,password=x`, `u=a&token=x`)
/// with each secret-named field's value hidden; None when it has none.
fn hide_options(w: &str) -> Option<String> {
    let sep = [',', '&'].into_iter().find(|c| w.contains(*c))?;
    let mut hid = false;
    let parts: Vec<String> = w
        .split(sep)
        .map(|p| match p.split_once('=') {
            Some((k, _)) if secret_name(k.trim_start_matches(['\'', '"', '-'])) => {
                hid = true;
                format!("{k}=***")
            }
            _ => p.into(),
        })
        .collect();
    hid.then(|| parts.join(&sep.to_string()))
}

pub(super) fn secret_name(name: &str) -> bool {
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

mod shapes;

// The tests are many (one per way a secret reaches a command line):
// they have a file of their own.
#[cfg(test)]
mod tests;
