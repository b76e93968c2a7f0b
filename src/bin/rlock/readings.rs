//! Which command an `exec` or `rw` line runs, settled before anything
//! else happens.
//!
//! Two forms are in use: flock(1)'s `KEY CMD ARGS...`, where everything
//! from the command's first word on is the command's (a `--` in it
//! included: `rlock exec k ssh host -- touch x` runs `ssh host -- touch x`),
//! and `KEY [--and KEY]... -- CMD ARGS...`, where the first `--` ends
//! rlock's own words. clap reads a line the first way: options are rlock's
//! up to the command's first word, which may come after a `--` or without
//! one. When the command's first word comes before any `--` and a `--`
//! follows it, the line also reads the second way — the words before that
//! `--` as more lock names and options (`rlock exec a b --ttl 5s -- cmd`),
//! as rlock before 0.2 read it — and the two readings run different
//! commands. Such a line is refused (exit 64), naming both readings and
//! how to write each; rlock never picks one.

use std::ffi::{OsStr, OsString};

use clap::{ArgAction, CommandFactory};

use crate::cli::{Cli, Command, Exec, Rw};

/// Refuses `cli`, parsed from `args`, when its command is not certain:
/// see the module's documentation. A command word that starts with `-`
/// before any `--` is an option rlock does not know (`--tll 5s`), never a
/// command.
pub(crate) fn check(args: &[OsString], cli: &Cli) -> Result<(), rlock::Error> {
    let (sub, key, also, command) = match &cli.command {
        Command::Exec(Exec {
            key, also, command, ..
        }) => ("exec", key, also, command),
        Command::Rw(Rw {
            key, also, command, ..
        }) => ("rw", key, also, command),
        _ => return Ok(()),
    };
    let Some(first) = command.first() else {
        return Ok(());
    };
    // clap hands the command over as written: it is the tail of the line.
    let start = args.len() - command.len();
    debug_assert_eq!(&args[start..], &command[..]);
    if start > 0 && args[start - 1] == "--" {
        return Ok(());
    }
    if first.as_encoded_bytes().first() == Some(&b'-') {
        return Err(rlock::Error::invalid(format!(
            "unknown option {:?} (rlock's options come before `--`; a command that \
             starts with '-' comes after it: rlock {sub} ... KEY -- CMD)",
            first.to_string_lossy()
        )));
    }
    if !command.iter().any(|w| w == "--") {
        return Ok(());
    }
    let mut keys = vec![key.clone()];
    keys.extend(also.iter().cloned());
    Err(rlock::Error::invalid(two_readings(
        args, sub, &keys, command,
    )))
}

/// The refusal of a line that reads two ways: what each reading runs
/// under which locks, and how to write it so that it reads one way only.
fn two_readings(args: &[OsString], sub: &str, keys: &[String], command: &[OsString]) -> String {
    let verb = match sub {
        "rw" => "rw MODE",
        _ => "exec",
    };
    let flock = format!(
        "as flock's KEY CMD ARGS it runs `{}` under {}",
        shown(command),
        locks(keys)
    );
    let mut line = format!("this command line reads two ways: {flock}; ");
    match lock_set(args, sub) {
        Some((set_keys, set_command)) => {
            let ands: String = set_keys[1..]
                .iter()
                .map(|k| format!(" --and {}", quoted(OsStr::new(k))))
                .collect();
            line += &format!(
                "as KEY... -- CMD it runs `{}` under {}. Write `rlock {verb} [OPTIONS] {} -- {}` \
                 for the first, `rlock {verb} [OPTIONS] {}{ands} -- {}` for the second",
                shown(&set_command),
                locks(&set_keys),
                keys_written(keys),
                shown(command),
                quoted(OsStr::new(&set_keys[0])),
                shown(&set_command),
            );
        }
        None => {
            line += &format!(
                "as KEY... -- CMD it is not a valid line. Write `rlock {verb} [OPTIONS] {} -- {}` \
                 to run that command, or name more locks with --and KEY before `--`",
                keys_written(keys),
                shown(command),
            );
        }
    }
    line
}

/// The second reading: every word before the first `--` a lock name or an
/// option, the command after it; `None` when clap finds that line invalid.
fn lock_set(args: &[OsString], sub: &str) -> Option<(Vec<String>, Vec<OsString>)> {
    let cmd = <Cli>::command().mut_subcommand(sub, |s| {
        s.mut_arg("key", |a| a.num_args(1..).action(ArgAction::Append))
            .mut_arg("command", |a| a.last(true).trailing_var_arg(false))
    });
    let matches = cmd.try_get_matches_from(args).ok()?;
    let m = matches.subcommand_matches(sub)?;
    let mut keys: Vec<String> = m.get_many::<String>("key")?.cloned().collect();
    keys.extend(m.get_many::<String>("also").into_iter().flatten().cloned());
    let command: Vec<OsString> = m.get_many::<OsString>("command")?.cloned().collect();
    Some((keys, command))
}

fn locks(keys: &[String]) -> String {
    let names: Vec<String> = keys.iter().map(|k| format!("{k:?}")).collect();
    match names.len() {
        1 => format!("lock {}", names[0]),
        _ => format!("locks {}", names.join(", ")),
    }
}

/// The keys as the first reading takes them: `KEY --and KEY...`.
fn keys_written(keys: &[String]) -> String {
    let mut out = quoted(OsStr::new(&keys[0]));
    for k in &keys[1..] {
        out += &format!(" --and {}", quoted(OsStr::new(k)));
    }
    out
}

/// A command as a shell would take it back, with its secrets hidden
/// (the line may land in a CI log).
fn shown(words: &[OsString]) -> String {
    let quoted: Vec<OsString> = words.iter().map(|w| quoted(w).into()).collect();
    rlock::conn::redact_command(&quoted)
}

/// One word, single-quoted when a shell would split or expand it.
fn quoted(word: &OsStr) -> String {
    let w = word.to_string_lossy();
    let plain = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%^".contains(c));
    if plain {
        w.into_owned()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn line(words: &str) -> Vec<OsString> {
        words.split(' ').map(OsString::from).collect()
    }

    /// The verdict on a command line, as `rlock` would give it.
    fn verdict(words: &str) -> Result<(Vec<String>, Vec<String>), String> {
        let args = line(words);
        let cli = <Cli>::try_parse_from(&args).map_err(|e| format!("clap: {e}"))?;
        check(&args, &cli).map_err(|e| e.to_string())?;
        let (key, also, command) = match cli.command {
            Command::Exec(Exec {
                key, also, command, ..
            })
            | Command::Rw(Rw {
                key, also, command, ..
            }) => (key, also, command),
            _ => unreachable!(),
        };
        let mut keys = vec![key];
        keys.extend(also);
        let command = command
            .into_iter()
            .map(|w| w.into_string().unwrap())
            .collect();
        Ok((keys, command))
    }

    fn runs(words: &str, keys: &[&str], command: &str) {
        let (k, c) = verdict(words).unwrap_or_else(|e| panic!("{words}: refused: {e}"));
        assert_eq!(k, keys, "{words}");
        assert_eq!(c.join(" "), command, "{words}");
    }

    fn refused(words: &str) -> String {
        match verdict(words) {
            Ok(v) => panic!("{words}: accepted as {v:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn flock_form_keeps_flocks_meaning() {
        runs("rlock exec k ls -l", &["k"], "ls -l");
        runs("rlock exec k sh -c true", &["k"], "sh -c true");
        runs(
            "rlock exec -n k ./job.sh --ttl 5m",
            &["k"],
            "./job.sh --ttl 5m",
        );
        runs("rlock exec k -n ./job.sh", &["k"], "./job.sh");
    }

    #[test]
    fn the_first_dashes_end_rlocks_words() {
        runs("rlock exec k -- ls -- x", &["k"], "ls -- x");
        runs("rlock exec k -n -- cmd", &["k"], "cmd");
        runs("rlock exec k -- --cmd -- x", &["k"], "--cmd -- x");
        runs("rlock exec a --and b -- cmd", &["a", "b"], "cmd");
        runs(
            "rlock exec a --and b --ttl 5s --and c -n -- cmd x",
            &["a", "b", "c"],
            "cmd x",
        );
        runs("rlock rw write a --and b -- cmd", &["a", "b"], "cmd");
        runs("rlock exec --and b a -- cmd", &["a", "b"], "cmd");
    }

    #[test]
    fn a_line_that_reads_two_ways_is_refused() {
        for words in [
            "rlock exec k ssh host -- touch /tmp/x",
            "rlock exec k timeout 1 -- sleep 3",
            "rlock exec k kubectl exec pod -- cmd",
            "rlock rw write k ssh host -- cmd",
            "rlock exec k echo hello -- world",
            "rlock exec a b --ttl 5s -- cmd",
            "rlock exec a b -n -- cmd",
            "rlock exec a b -- cmd",
        ] {
            let e = refused(words);
            assert!(e.contains("reads two ways"), "{words}: {e}");
        }
    }

    #[test]
    fn the_refusal_names_both_readings_and_both_spellings() {
        let e = refused("rlock exec k ssh host -- touch /tmp/x");
        assert!(
            e.contains("runs `ssh host -- touch /tmp/x` under lock \"k\""),
            "{e}"
        );
        assert!(
            e.contains("runs `touch /tmp/x` under locks \"k\", \"ssh\", \"host\""),
            "{e}"
        );
        assert!(
            e.contains("`rlock exec [OPTIONS] k -- ssh host -- touch /tmp/x`"),
            "{e}"
        );
        assert!(
            e.contains("`rlock exec [OPTIONS] k --and ssh --and host -- touch /tmp/x`"),
            "{e}"
        );
        let e = refused("rlock exec a b --ttl 5s -- cmd");
        assert!(
            e.contains("runs `b --ttl 5s -- cmd` under lock \"a\""),
            "{e}"
        );
        assert!(e.contains("runs `cmd` under locks \"a\", \"b\""), "{e}");
        let e = refused("rlock rw write k ssh host -- cmd");
        assert!(
            e.contains("`rlock rw MODE [OPTIONS] k -- ssh host -- cmd`"),
            "{e}"
        );
    }

    #[test]
    fn a_second_reading_that_is_no_valid_line_still_refuses() {
        // -c is flock's command string: with a command after `--` too, the
        // lock-set reading is invalid; the line is still not run.
        let e = refused("rlock exec k sh -c true -- x");
        assert!(e.contains("not a valid line"), "{e}");
        assert!(
            e.contains("`rlock exec [OPTIONS] k -- sh -c true -- x`"),
            "{e}"
        );
    }

    #[test]
    fn a_command_word_with_a_dash_is_a_mistyped_option() {
        let e = refused("rlock exec k --tll 5s -- true");
        assert!(e.contains("unknown option \"--tll\""), "{e}");
        let e = refused("rlock exec k --tll 5s true");
        assert!(e.contains("unknown option \"--tll\""), "{e}");
    }

    #[test]
    fn words_are_quoted_and_secrets_hidden() {
        assert_eq!(quoted(OsStr::new("exit 4")), "'exit 4'");
        assert_eq!(quoted(OsStr::new("it's")), r"'it'\''s'");
        assert_eq!(quoted(OsStr::new("/tmp/x")), "/tmp/x");
        let shown = shown(&line("mysql --password hunter2 db"));
        assert!(!shown.contains("hunter2"), "{shown}");
    }
}
