//! The reference agrees with the binary. (man/ and completions/ are
//! rendered and checked for staleness by the binary's own unit test,
//! src/bin/rlock/cli/generate.rs.)

use crate::util::*;

/// Every environment variable `rlock --help` lists has its row in
/// docs/guide.md's table of variables.
#[test]
fn the_guide_documents_every_variable_the_help_names() {
    let help = bare_rlock().args(["--help"]).run().ok().stdout;
    let (_, env) = help
        .split_once("Environment:\n")
        .expect("`rlock --help` has an Environment section");
    let env = env.split("\n\n").next().unwrap();
    let names: Vec<&str> = env
        .split(|c: char| !(c.is_ascii_uppercase() || c == '_'))
        .filter(|w| w.starts_with("RLOCK_"))
        .collect();
    assert!(names.len() >= 12, "{names:?} in {env}");
    let guide =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/guide.md")).unwrap();
    let rows: Vec<&str> = guide
        .lines()
        .filter(|l| l.starts_with("| `RLOCK_"))
        .collect();
    for name in names {
        let cell = format!("`{name}`");
        assert!(
            rows.iter()
                .any(|r| r.split(" | ").next().is_some_and(|c| c.contains(&cell))),
            "{name} is in `rlock --help` but has no row in docs/guide.md's table"
        );
    }
}
