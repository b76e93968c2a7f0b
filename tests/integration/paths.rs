//! Every file named in a code comment or in the docs exists, so a comment
//! or a page that names a moved or deleted file fails here.
//!
//! A path from the repository's root (`src/lock/keys.rs`, `lua/`,
//! `tests/integration/util/`, `docs/guide.md`) must exist as written, file
//! or folder. A name relative to somewhere (`guard/release.rs`,
//! `wake.lua`, `guide.md`) must be the end of some file's path in the tree.
//! Read: the comments in src/, lua/, tests/, benches/, examples/,
//! scripts/, build.rs, Cargo.toml and the Makefile; all of README.md and
//! docs/. Not read: CHANGELOG.md and BENCHMARKS.md (records of the past)
//! and the generated man/ and completions/.

use std::path::{Path, PathBuf};

/// Paths that start with one of these are checked as written.
const ROOTS: [&str; 7] = [
    "src/",
    "lua/",
    "tests/",
    "docs/",
    "benches/",
    "examples/",
    "scripts/",
];

/// Paths from the root of other projects' trees, named as theirs:
/// util-linux's flock tests (tests/integration/flock.rs).
const ELSEWHERE: [&str; 1] = ["tests/ts/"];

/// File names with one of these endings are checked wherever they appear.
/// (`.sh` only from a root: the docs' examples run `./deploy.sh`.)
const NAMED: [&str; 3] = [".rs", ".lua", ".md"];

/// Every file under `dir`, relative to `root`, '/'-separated; hidden
/// folders and target/ left out.
fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with('.') || (dir == root && name == "target") {
            continue;
        }
        if path.is_dir() {
            walk(root, &path, out);
        } else {
            out.push(
                path.strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
}

/// The text of `file` a reader takes for prose: the whole of a Markdown
/// page, the comments of code (from a comment mark at a line's start or
/// after a blank to the line's end). Lines keep their numbers.
fn prose(file: &str, text: &str) -> Vec<String> {
    if file.ends_with(".md") {
        return text.lines().map(String::from).collect();
    }
    let mark = if file.ends_with(".rs") {
        "//"
    } else if file.ends_with(".lua") {
        "--"
    } else {
        "#"
    };
    text.lines()
        .map(|line| {
            let at = line.match_indices(mark).find(|&(i, _)| {
                line[..i]
                    .chars()
                    .next_back()
                    .is_none_or(char::is_whitespace)
            });
            at.map_or(String::new(), |(i, _)| {
                let rest = line[i..].trim_start_matches(|c| mark.contains(c) || c == '!');
                rest.trim_start().to_string()
            })
        })
        .collect()
}

/// The path-like words of `line`: runs of letters, digits and `_./-`, not
/// part of a URL, an absolute path or a `~`/`$VAR` path, with a sentence's
/// full stop taken off.
fn words(line: &str) -> Vec<&str> {
    let is_path = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices().chain([(line.len(), ' ')]) {
        match (start, is_path(c)) {
            (None, true) => start = Some(i),
            (Some(s), false) => {
                start = None;
                let before = line[..s].chars().next_back();
                let word = line[s..i].trim_end_matches('.');
                if !word.is_empty()
                    && !word.starts_with('/')
                    && !word.contains("//")
                    && !before.is_some_and(|b| ":~$@".contains(b))
                {
                    out.push(word);
                }
            }
            _ => {}
        }
    }
    out
}

/// Why `word` names nothing in `files` (the tree, from `root`), if it is a
/// path that does.
fn missing(root: &Path, files: &[String], word: &str) -> Option<&'static str> {
    let mut path = word;
    while let Some(rest) = path.strip_prefix("./").or_else(|| path.strip_prefix("../")) {
        path = rest;
    }
    if ELSEWHERE.iter().any(|e| path.starts_with(e)) {
        return None;
    }
    if ROOTS.iter().any(|r| path.starts_with(r)) {
        let exists = if path.ends_with('/') {
            root.join(path).is_dir()
        } else {
            root.join(path).exists()
        };
        return (!exists).then_some("no such file or folder");
    }
    if !NAMED
        .iter()
        .any(|ext| path.len() > ext.len() && path.ends_with(ext))
    {
        return None;
    }
    let tail = format!("/{path}");
    let found = files.iter().any(|f| f == path || f.ends_with(&tail));
    (!found).then_some("no file ends so")
}

#[test]
fn every_path_named_in_comments_and_docs_exists() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    walk(&root, &root, &mut files);
    files.sort();
    let read = files.iter().filter(|f| {
        let top = f.split('/').next().unwrap();
        let code = [".rs", ".lua", ".sh", ".toml"]
            .iter()
            .any(|e| f.ends_with(e));
        matches!(top, "docs")
            || (code && ["src", "lua", "tests", "benches", "examples", "scripts"].contains(&top))
            || ["build.rs", "Cargo.toml", "Makefile", "README.md"].contains(&f.as_str())
    });
    let (mut stale, mut checked) = (Vec::new(), 0);
    for file in read {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        for (n, line) in prose(file, &text).iter().enumerate() {
            for word in words(line) {
                if ROOTS.iter().any(|r| word.contains(r)) {
                    checked += 1;
                }
                if let Some(why) = missing(&root, &files, word) {
                    stale.push(format!("{file}:{}: {word} ({why})", n + 1));
                }
            }
        }
    }
    // The scan reads what it is meant to: the docs alone name far more.
    assert!(checked > 200, "only {checked} paths from the root found");
    assert!(stale.is_empty(), "stale paths:\n{}", stale.join("\n"));
}

#[test]
fn paths_are_read_from_comments_and_prose_only() {
    let code = "let p = \"x/gone.rs\"; //! see src/lock/keys.rs.\n--- x";
    assert_eq!(
        prose("a.rs", code),
        ["see src/lock/keys.rs.".to_string(), String::new()]
    );
    assert_eq!(prose("a.lua", code)[1], "x");
    assert_eq!(
        words("(`src/lock/keys.rs`, https://h/src/a.rs, /tmp/b.rs, ~/c.rs)."),
        ["src/lock/keys.rs", "https"]
    );
}
