//! What a watched process's name and command line tell: is it a program
//! that runs a script (a shell or an interpreter), and, for a shell run
//! with `-c`, does its command string end with an `rlock acquire` (the
//! shell then exits as rlock does)? Pure functions over the text.

/// Shells, by the name of their program (version digits stripped).
const SHELLS: [&str; 17] = [
    "sh", "bash", "rbash", "dash", "ash", "hush", "zsh", "ksh", "mksh", "lksh", "pdksh", "oksh",
    "yash", "posh", "fish", "tcsh", "csh",
];

/// Interpreters whose scripts run commands as a shell script does.
const INTERPRETERS: [&str; 10] = [
    "python", "perl", "ruby", "node", "nodejs", "php", "lua", "luajit", "tclsh", "pwsh",
];

/// Is `name` (a program's file name, or its comm) a shell or a script
/// interpreter? Version suffixes are ignored (`python3.12`, `ksh93`,
/// `perl5.36.0`).
pub(super) fn runs_scripts(name: &str) -> bool {
    let base = name.trim().rsplit('/').next().unwrap_or("");
    let base = base.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    SHELLS.contains(&base) || INTERPRETERS.contains(&base)
}

/// Is `name` a shell (not an interpreter)?
pub(super) fn is_shell(name: &str) -> bool {
    let base = name.trim().rsplit('/').next().unwrap_or("");
    SHELLS.contains(&base.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.'))
}

/// The command string of a shell's argv (`sh -c STRING`, `bash -ec
/// STRING`, `bash -o pipefail -c STRING`, `busybox sh -c STRING`, `fish
/// --command=STRING`), if it was started with one.
pub(super) fn command_string(argv: &[&[u8]]) -> Option<String> {
    let mut i = 1;
    if argv
        .first()
        .is_some_and(|a| a.rsplit(|&b| b == b'/').next() == Some(b"busybox"))
    {
        i = 2; // the applet's name
    }
    let mut c = false;
    while let Some(&a) = argv.get(i) {
        if a == b"--" || a == b"-" {
            i += 1;
            break;
        }
        if let Some(long) = a.strip_prefix(b"--") {
            if let Some(s) = long.strip_prefix(b"command=") {
                return Some(String::from_utf8_lossy(s).into_owned());
            }
            match long {
                b"command" => c = true,
                b"rcfile" | b"init-file" => i += 1,
                _ => {}
            }
            i += 1;
            if c {
                break;
            }
            continue;
        }
        if a.len() > 1 && (a[0] == b'-' || a[0] == b'+') {
            for &o in &a[1..] {
                match o {
                    b'c' => c = true,
                    // An option with an argument: -o pipefail, -O extglob.
                    b'o' | b'O' => i += 1,
                    _ => {}
                }
            }
            i += 1;
            continue;
        }
        break;
    }
    c.then(|| argv.get(i).map(|s| String::from_utf8_lossy(s).into_owned()))
        .flatten()
}

/// Does the last command of shell source `s` (what runs after its last
/// `;`, `&`, `&&` or newline outside quotes, parentheses, braces and
/// compound commands; `a || b` is one) run rlock with the arguments
/// `ours` (its argv from the subcommand on, `acquire k --keep`; a word of
/// the text with a `$` in it stands for any one argument): is the shell
/// done once that rlock is? An approximation of the shell's grammar (no
/// here-documents), enough for a command string.
///
/// Only when that command *is* the rlock call: after its assignments
/// (`tok=$(rlock ...`) and `exec`, its first word is the program, not a
/// reserved word. A compound command that merely contains one (`if rlock
/// acquire ...; then job; fi`, `for`, `while`, `{ ...; }`, `!`) runs more
/// after it, or may: not refused (refusing made the `if` skip its job
/// with exit 0).
pub(super) fn ends_with(s: &str, ours: &[&str]) -> bool {
    const RESERVED: &[&str] = &[
        "if", "then", "elif", "else", "while", "until", "for", "do", "case", "{", "!", "select",
    ];
    let Some(last) = last_command(s) else {
        return false;
    };
    let w = words(last);
    let assignment = |p: &str| p.contains('=') && !p.starts_with('=');
    let program = w.iter().position(|p| p != "exec" && !assignment(p));
    let Some(program) = program.filter(|&j| !RESERVED.contains(&w[j].as_str())) else {
        return false;
    };
    !ours.is_empty()
        && w.windows(ours.len()).enumerate().any(|(i, win)| {
            i > program
                && win
                    .iter()
                    .zip(ours)
                    .all(|(text, arg)| text == arg || text.contains('$'))
        })
}

/// The words of shell text, roughly: split at blanks and operators
/// outside quotes, quotes removed (`"$B" acquire 'a b'` is `$B`,
/// `acquire`, `a b`; `tok=$(rlock` is `tok=$`, `rlock`).
fn words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut w = String::new();
    let mut quote: Option<char> = None;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => w.extend(chars.next()),
            (Some(_), c) => w.push(c),
            (None, '\'' | '"') => quote = Some(c),
            (None, '\\') => w.extend(chars.next()),
            (None, c) if c.is_whitespace() || ";&|()<>`".contains(c) => {
                if !w.is_empty() {
                    out.push(std::mem::take(&mut w));
                }
            }
            (None, c) => w.push(c),
        }
    }
    if !w.is_empty() {
        out.push(w);
    }
    out
}

/// What opens a nested context, by the character that closes it.
#[derive(Clone, Copy, PartialEq)]
enum Open {
    /// `(`, `$(`: closed by `)`.
    Paren,
    /// A `{` word: closed by a `}` word.
    Brace,
    /// `${`: closed by `}`.
    Param,
    Double,
    Backtick,
}

/// The text of the last non-empty top-level command of `s`.
fn last_command(s: &str) -> Option<&str> {
    let b = s.as_bytes();
    let mut stack: Vec<Open> = Vec::new();
    // Depth of if/while/until/for/case/select at the top level.
    let mut compound = 0u32;
    let mut word = String::new();
    let mut command_position = true;
    let (mut start, mut content) = (0, false);
    let mut last: Option<&str> = None;
    let mut i = 0;
    // A word ended: track compound commands and braces by it.
    let end_word = |word: &mut String,
                    stack: &mut Vec<Open>,
                    compound: &mut u32,
                    command_position: &mut bool| {
        if word.is_empty() {
            return;
        }
        let top = stack.is_empty();
        match word.as_str() {
            "{" if *command_position => stack.push(Open::Brace),
            "}" if *command_position && stack.last() == Some(&Open::Brace) => {
                stack.pop();
            }
            "if" | "while" | "until" | "for" | "case" | "select" if *command_position && top => {
                *compound += 1
            }
            "fi" | "done" | "esac" if *command_position && top => {
                *compound = compound.saturating_sub(1)
            }
            _ => {}
        }
        *command_position = match word.as_str() {
            "{" | "}" | "then" | "do" | "else" | "elif" | "if" | "while" | "until" | "!"
            | "time" => *command_position,
            w => *command_position && w.contains('=') && !w.starts_with('='),
        };
        word.clear();
    };
    while i < b.len() {
        let ch = b[i];
        let next = b.get(i + 1).copied();
        match stack.last() {
            Some(Open::Double) | Some(Open::Backtick) | Some(Open::Param) => {
                let here = *stack.last().unwrap_or(&Open::Double);
                match ch {
                    b'\\' => i += 1,
                    b'"' if here == Open::Double => {
                        stack.pop();
                    }
                    b'`' if here == Open::Backtick => {
                        stack.pop();
                    }
                    b'}' if here == Open::Param => {
                        stack.pop();
                    }
                    b'$' if next == Some(b'(') && here != Open::Backtick => {
                        stack.push(Open::Paren);
                        i += 1;
                    }
                    b'$' if next == Some(b'{') && here != Open::Backtick => {
                        stack.push(Open::Param);
                        i += 1;
                    }
                    b'`' if here != Open::Backtick => stack.push(Open::Backtick),
                    _ => {}
                }
                i += 1;
                continue;
            }
            _ => {}
        }
        // Code: the top level, or inside parentheses or braces.
        match ch {
            b' ' | b'\t' => end_word(&mut word, &mut stack, &mut compound, &mut command_position),
            b'#' if word.is_empty() => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'\\' => {
                content = true;
                word.push('\\');
                i += 1;
            }
            b'\'' => {
                content = true;
                word.push('\'');
                while i + 1 < b.len() && b[i + 1] != b'\'' {
                    i += 1;
                }
                i += 1;
            }
            b'"' => {
                content = true;
                word.push('"');
                stack.push(Open::Double);
            }
            b'`' => {
                content = true;
                word.push('`');
                stack.push(Open::Backtick);
            }
            b'$' if next == Some(b'(') || next == Some(b'{') => {
                content = true;
                word.push('$');
                stack.push(if next == Some(b'(') {
                    Open::Paren
                } else {
                    Open::Param
                });
                i += 1;
            }
            b'(' => {
                content = true;
                end_word(&mut word, &mut stack, &mut compound, &mut command_position);
                stack.push(Open::Paren);
                command_position = true;
            }
            b')' => {
                end_word(&mut word, &mut stack, &mut compound, &mut command_position);
                if stack.last() == Some(&Open::Paren) {
                    stack.pop();
                }
                command_position = true;
            }
            // A redirection's `&` (`2>&1`, `&>f`, `>&2`) is no separator.
            b'&' if next == Some(b'>') || (i > 0 && matches!(b[i - 1], b'>' | b'<')) => {
                word.push('&');
            }
            // `a && b`: b runs, under the lock, once a succeeded (cron's
            // `rlock acquire -n k --keep >/dev/null && ./job`): a
            // separator, as `;` is. (`a || b` runs b only when a failed:
            // one command.)
            b'&' if next == Some(b'&') => {
                end_word(&mut word, &mut stack, &mut compound, &mut command_position);
                command_position = true;
                if stack.is_empty() && compound == 0 {
                    if content {
                        last = Some(&s[start..i]);
                    }
                    (start, content) = (i + 2, false);
                }
                i += 1;
            }
            b'|' => {
                end_word(&mut word, &mut stack, &mut compound, &mut command_position);
                command_position = true;
                if next == Some(b'|') {
                    i += 1;
                }
            }
            b';' | b'&' | b'\n' => {
                end_word(&mut word, &mut stack, &mut compound, &mut command_position);
                command_position = true;
                // Only now: the word just ended may have closed a compound.
                if stack.is_empty() && compound == 0 {
                    if content {
                        last = Some(&s[start..i]);
                    }
                    (start, content) = (i + 1, false);
                }
            }
            b'<' | b'>' => {
                end_word(&mut word, &mut stack, &mut compound, &mut command_position);
                content = true;
            }
            _ => {
                content = true;
                word.push(char::from(ch));
            }
        }
        i += 1;
    }
    end_word(&mut word, &mut stack, &mut compound, &mut command_position);
    if content {
        last = Some(&s[start.min(s.len())..]);
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shells_and_interpreters_are_told_by_name() {
        for n in [
            "sh",
            "bash",
            "dash",
            "/usr/bin/zsh",
            "ksh93",
            "mksh",
            "ash",
            "fish",
            "python3",
            "python3.12",
            "perl",
            "ruby",
            "node",
            "sh\n",
        ] {
            assert!(runs_scripts(n), "{n}");
        }
        for n in [
            "find", "xargs", "parallel", "make", "busybox", "systemd", "tini", "sudo", "timeout",
            "watch", "rlock", "",
        ] {
            assert!(!runs_scripts(n), "{n}");
        }
        assert!(is_shell("dash") && !is_shell("python3"));
    }

    #[test]
    fn the_command_string_is_found_behind_options() {
        let cs = |argv: &[&str]| {
            let v: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
            command_string(&v)
        };
        assert_eq!(cs(&["sh", "-c", "x", "y"]).as_deref(), Some("x"));
        assert_eq!(cs(&["bash", "-ec", "x"]).as_deref(), Some("x"));
        assert_eq!(cs(&["bash", "-e", "-c", "x"]).as_deref(), Some("x"));
        assert_eq!(
            cs(&["bash", "-o", "pipefail", "-c", "x"]).as_deref(),
            Some("x")
        );
        assert_eq!(cs(&["bash", "--norc", "-c", "x"]).as_deref(), Some("x"));
        assert_eq!(cs(&["busybox", "sh", "-c", "x"]).as_deref(), Some("x"));
        assert_eq!(cs(&["fish", "--command=x"]).as_deref(), Some("x"));
        assert_eq!(cs(&["fish", "--command", "x"]).as_deref(), Some("x"));
        assert_eq!(cs(&["bash", "deploy.sh"]), None);
        assert_eq!(cs(&["bash", "-e", "/w/step.sh"]), None);
        assert_eq!(cs(&["bash", "-s"]), None);
        assert_eq!(cs(&["bash"]), None);
        // A file named like an option's letter is no -c.
        assert_eq!(cs(&["sh", "c"]), None);
    }

    const OURS: [&str; 3] = ["acquire", "k", "--keep"];

    fn ends_with_acquire(s: &str) -> bool {
        ends_with(s, &OURS)
    }

    #[test]
    fn a_command_string_that_ends_with_acquire_is_told() {
        for s in [
            "rlock acquire k --keep",
            "\"$B\" acquire k --keep",
            "  rlock acquire k --keep ;\n  ",
            "rlock acquire k --keep >/dev/null 2>&1",
            "rlock acquire k --keep || exit 1",
            "cd /srv; rlock acquire k --keep",
            "tok=$(rlock acquire k --keep)",
            "tok=`rlock acquire k --keep`",
            "echo 'a; b'; rlock acquire k --keep # the lock",
            "x=1\nrlock -v acquire k --keep &",
            "for i in 1 2; do sleep 1; done; rlock acquire k --keep",
            "( rlock acquire k --keep )",
            "rlock acquire \"$KEY\" --keep",
            "rlock acquire 'k' \"--keep\"",
        ] {
            assert!(ends_with_acquire(s), "{s:?}");
        }
        for s in [
            "rlock acquire k --keep; sleep 5",
            "if rlock acquire -n k --keep --ttl 3s >/dev/null; then job; fi",
            "{ rlock acquire -n k --keep >/dev/null && sleep 1; }",
            "for i in 1; do rlock acquire -n k --keep >/dev/null && sleep 1; done",
            "rlock acquire k --keep && echo ok",
            "rlock acquire -n k --keep >/dev/null && ./job.sh",
            "tok=$(rlock acquire k --keep) && ./job.sh",
            "rlock acquire k --keep\n./deploy.sh",
            "tok=$(rlock acquire k --keep) || exit 9\necho \"$$\" > \"$D/pid\"\nwhile [ ! -e \"$D/go\" ]; do sleep 0.05; done",
            "rlock acquire -n k --keep >/dev/null || exit 0\necho holding >f\nwhile [ ! -e g ]; do sleep 0.05; done",
            "rlock acquire k --keep 2>&1; job",
            "case $x in a) rlock acquire k --keep;; esac; job",
            "echo \"$(rlock acquire k --keep); x\"; job",
            "rlock acquire k --keep; { job; }",
            "rlock acquire k --keep; rlock exec j -- job",
            // Another rlock last (the test's `if tok=$(... kp ...)`).
            "tok=$(rlock acquire k --keep) || exit 9\nif t=$(rlock acquire j --keep | tail -n1); then exit 5; fi",
            "x",
            "",
            "# rlock acquire k --keep",
        ] {
            assert!(!ends_with_acquire(s), "{s:?}");
        }
        assert_eq!(
            words("\"$B\" acquire 'a b' x\\ y"),
            ["$B", "acquire", "a b", "x y"]
        );
    }
}
