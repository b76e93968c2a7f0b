//! man/ and completions/, rendered from the clap definition and
//! committed; [`man_pages_and_completions_are_fresh`] fails when they are
//! stale, and rewrites them under `RLOCK_BLESS=1` (`make docs`).
//!
//! A unit test of the binary rather than a hidden subcommand: it renders
//! exactly what this binary parses, runs in every `cargo test`, and keeps
//! clap_mangen and clap_complete out of the shipped binary (they are
//! dev-dependencies).

use std::path::Path;

use clap::CommandFactory;
use clap_complete::Shell;

use super::Cli;
use super::global::ENVIRONMENT;

/// The subcommands that take a new grant, where `--min-replicas` applies.
const GRANTS: &[&str] = &["acquire", "exec", "rw", "doctor"];

/// Subcommand `name` as its man page shows it: with the global options
/// (--url, --prefix, TLS...; each with its environment variable) that
/// apply to it — `--min-replicas` for the commands in [`GRANTS`], the
/// history limits for every command that writes a lock's history (all but
/// doctor) — and not the others, which it accepts but ignores.
pub(crate) fn page_of(name: &str) -> clap::Command {
    let grants = GRANTS.contains(&name);
    let writes = name != "doctor";
    // Hidden at the top before clap copies the globals into every
    // subcommand (build); hiding them in a built subcommand breaks it.
    let mut top = <Cli>::command()
        .mut_arg("min_replicas", |a| a.hide(!grants))
        .mut_arg("history_events", |a| a.hide(!writes))
        .mut_arg("history_retention", |a| a.hide(!writes));
    top.build();
    top.find_subcommand(name)
        .unwrap_or_else(|| panic!("no subcommand {name}"))
        .clone()
}

/// Every generated file: its path under the crate's root and its bytes.
fn generated() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut top = <Cli>::command();
    // The top page's synopsis lists every global option.
    top.build();
    // The environment has a section of its own (see `environment`), not
    // the text of the top page's long help.
    let long = top.get_after_long_help().map(|h| h.to_string());
    let page = match long {
        Some(h) => top
            .clone()
            .after_long_help(h.replace(ENVIRONMENT, "").trim_start().to_string()),
        None => top.clone(),
    };
    out.push(("man/rlock.1".to_string(), man_page(page)));
    // One page per subcommand, as git and cargo do: `man rlock-exec`.
    // Each with the global options that apply to it (page_of).
    for sub in top.get_subcommands() {
        let sub = match sub.get_name() {
            "help" => sub.clone(),
            name => page_of(name),
        };
        let name = format!("rlock-{}", sub.get_name());
        let page = sub
            .clone()
            .name(&*name.clone().leak())
            .bin_name(format!("rlock {}", sub.get_name()));
        out.push((format!("man/{name}.1"), man_page(page)));
    }
    for (shell, file) in [
        (Shell::Bash, "completions/rlock.bash"),
        (Shell::Zsh, "completions/_rlock"),
        (Shell::Fish, "completions/rlock.fish"),
    ] {
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut <Cli>::command(), "rlock", &mut buf);
        out.push((file.to_string(), buf));
    }
    out
}

/// `cmd`'s man page, with an ENVIRONMENT section (before EXTRA, where the
/// after-help text goes).
fn man_page(cmd: clap::Command) -> Vec<u8> {
    let mut man = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut man).unwrap();
    let man = String::from_utf8(man).unwrap();
    let at = ["\n.SH EXTRA\n", "\n.SH VERSION\n"]
        .iter()
        .find_map(|s| man.find(s).map(|i| i + 1))
        .unwrap_or(man.len());
    format!("{}{}{}", &man[..at], environment(), &man[at..]).into_bytes()
}

/// [`ENVIRONMENT`] as a man page section, one tagged paragraph (.TP) per
/// variable. As the help's text (aligned columns), man refilled its lines
/// and wrapped them mid-column.
fn environment() -> String {
    let mut out = String::from(".SH ENVIRONMENT\n");
    // After the "Environment:" line: `  NAME    text`, then continuation
    // lines indented deeper.
    for line in ENVIRONMENT.lines().skip(1) {
        let body = line.trim_start();
        if line.len() - body.len() > 2 {
            out.push_str(&roff(body));
        } else if let Some((names, text)) = body.split_once("  ") {
            out.push_str(".TP\n");
            out.push_str(&format!("\\fB{}\\fR\n", roff(names).trim_end()));
            out.push_str(&roff(text.trim_start()));
        } else {
            panic!("ENVIRONMENT: {line:?} is neither `  NAME  text` nor a continuation");
        }
    }
    out
}

/// One line of text in roff: backslashes, dashes and apostrophes as
/// clap_mangen writes them, and a leading `.` or `'` kept from being read
/// as a request.
fn roff(text: &str) -> String {
    let t = text
        .replace('\\', "\\e")
        .replace('-', "\\-")
        .replace('\'', "\\*(Aq");
    let lead = if t.starts_with(['.', '\'']) {
        "\\&"
    } else {
        ""
    };
    format!("{lead}{t}\n")
}

#[test]
fn man_pages_and_completions_are_fresh() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bless = std::env::var_os("RLOCK_BLESS").is_some();
    let mut stale = Vec::new();
    for (file, want) in generated() {
        let path = root.join(&file);
        if bless {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &want).unwrap();
        } else if std::fs::read(&path).ok().as_deref() != Some(&want[..]) {
            stale.push(file);
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated files {stale:?}: run `make docs` \
         (RLOCK_BLESS=1 cargo test --locked --bin rlock generate)"
    );
}

/// A subcommand's man page lists the global options that apply to it and
/// not the others: `--min-replicas` only where a grant is taken.
#[test]
fn each_page_lists_only_the_options_that_apply() {
    let synopsis = |name: &str| -> String {
        let mut man = Vec::new();
        clap_mangen::Man::new(page_of(name))
            .render_synopsis_section(&mut man)
            .unwrap();
        String::from_utf8(man).unwrap()
    };
    for name in ["acquire", "exec", "rw"] {
        let s = synopsis(name);
        assert!(s.contains(r"\-\-min\-replicas"), "{name}: {s}");
        assert!(s.contains(r"\-\-history\-events"), "{name}: {s}");
    }
    for name in ["status", "list", "release", "break", "top", "metrics"] {
        let s = synopsis(name);
        assert!(!s.contains(r"\-\-min\-replicas"), "{name}: {s}");
        assert!(s.contains(r"\-\-url"), "{name}: {s}");
    }
    let s = synopsis("doctor");
    assert!(!s.contains(r"\-\-history\-events"), "doctor: {s}");
}

/// Every page lists the environment as a section of tagged paragraphs,
/// one per variable, and no longer as help text (which man refilled).
#[test]
fn man_pages_list_the_environment_one_variable_a_paragraph() {
    let entries = ENVIRONMENT
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with("   "))
        .count();
    for (file, page) in generated() {
        if !file.starts_with("man/") {
            continue;
        }
        let page = String::from_utf8(page).unwrap();
        let (_, env) = page.split_once(".SH ENVIRONMENT\n").expect(&file);
        let env = env.split("\n.SH ").next().unwrap();
        assert_eq!(env.matches(".TP\n\\fBRLOCK_").count(), entries, "{file}");
        assert!(env.contains("\\fBRLOCK_URL\\fR\nRedis URL(s)"), "{file}");
        assert!(!page.contains("Environment:"), "{file}");
    }
}
