//! man/ and completions/ are generated from the clap definition and
//! committed; this test fails when they are stale. Regenerate with
//! `RLOCK_BLESS=1 cargo test --test integration docs`.

use std::path::Path;

use clap_complete::Shell;

#[allow(dead_code)]
#[path = "../../src/bin/rlock/cli.rs"]
mod cli;

fn generated() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut top = cli::command();
    // Propagates the global options (--url, --prefix, --connect-timeout,
    // TLS, ...; each with its environment variable) to every subcommand,
    // so that `man rlock-exec` lists them too.
    top.build();
    let mut man = Vec::new();
    clap_mangen::Man::new(top.clone()).render(&mut man).unwrap();
    out.push(("man/rlock.1".to_string(), man));
    // One page per subcommand, as git and cargo do: `man rlock-exec`.
    // Each with the global options that apply to it (cli::page_of).
    for sub in top.get_subcommands() {
        let sub = match sub.get_name() {
            "help" => sub.clone(),
            name => cli::page_of(name),
        };
        let name = format!("rlock-{}", sub.get_name());
        let extra = match sub.get_after_help() {
            Some(h) => format!("{h}\n\n{}", cli::ENVIRONMENT),
            None => cli::ENVIRONMENT.to_string(),
        };
        let page = sub
            .clone()
            .name(&*name.clone().leak())
            .bin_name(format!("rlock {}", sub.get_name()))
            .after_help(extra);
        let mut man = Vec::new();
        clap_mangen::Man::new(page).render(&mut man).unwrap();
        out.push((format!("man/{name}.1"), man));
    }
    for (shell, file) in [
        (Shell::Bash, "completions/rlock.bash"),
        (Shell::Zsh, "completions/_rlock"),
        (Shell::Fish, "completions/rlock.fish"),
    ] {
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut cli::command(), "rlock", &mut buf);
        out.push((file.to_string(), buf));
    }
    out
}

#[test]
fn man_page_and_completions_are_fresh() {
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
        "stale generated files {stale:?}: run `RLOCK_BLESS=1 cargo test --test integration docs`"
    );
}

/// A subcommand's man page lists the global options that apply to it and
/// not the others: `--min-replicas` only where a grant is taken.
#[test]
fn each_page_lists_only_the_options_that_apply() {
    let synopsis = |name: &str| -> String {
        let mut man = Vec::new();
        clap_mangen::Man::new(cli::page_of(name))
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
