//! Build-time work that would otherwise cost every run.
//!
//! 1. Each Lua script as it is sent, written to `$OUT_DIR/lua/<file>`:
//!    a line `--@<part>` is replaced by `lua/part/<part>.lua`
//!    (`--@common` by `lua/common.lua`), parts included the same way,
//!    each at most once per script, where it is first asked for: so a
//!    fast path before `--@common` carries only the parts it names (the
//!    history writer, `--@log`), and a script without such lines is sent
//!    as it is. Its SHA1 for EVALSHA, as
//!    `RLOCK_LUA_SHA_<file>`: src/lock/script.rs includes both, so no run
//!    builds or hashes ~25 KB of scripts (hashing alone cost ~45 µs of
//!    every `rlock exec`).
//!
//! 2. Link the unwinder statically into release builds on Linux/glibc.
//!
//! Rust's std links libgcc_s.so for its unwinder. Loading it is not free:
//! besides the mapping and relocation, its constructor probes the CPU with
//! a dozen CPUID instructions, which trap to the hypervisor on a virtual
//! machine (about 4 µs each here). That is ~100 µs, a tenth of what
//! `rlock exec k -- true` spends of its own (see BENCHMARKS.md, "exec
//! start-up profile"). libgcc_eh.a is the same unwinder as a static
//! archive (what `gcc -static-libgcc` uses); named here, it comes before
//! std's `-lgcc_s` on the link line, and with `--as-needed` libgcc_s is
//! then not loaded at all. Release builds only (the LTO object asks for
//! every unwinder symbol before libgcc_s is seen), and only when the C
//! compiler has the archive; otherwise nothing changes.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    lua_scripts();
    static_unwinder();
}

fn lua_scripts() {
    println!("cargo:rerun-if-changed=lua");
    println!("cargo:rerun-if-changed=lua/part");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("lua");
    std::fs::create_dir_all(&out).expect("create $OUT_DIR/lua");
    for entry in std::fs::read_dir("lua").expect("lua/").flatten() {
        let path = entry.path();
        let name = path
            .file_name()
            .expect("a file")
            .to_string_lossy()
            .into_owned();
        if !name.ends_with(".lua") || name == "common.lua" {
            continue;
        }
        let mut code = String::new();
        assemble(&path, &mut Vec::new(), &mut code);
        std::fs::write(out.join(&name), &code).expect("write a Lua script");
        let sha = sha1_smol::Sha1::from(code.as_bytes()).digest();
        println!("cargo:rustc-env=RLOCK_LUA_SHA_{name}={sha}");
    }
}

/// `path` with every `--@<part>` line replaced by that part (see above),
/// appended to `code`; `done` the parts in already.
fn assemble(path: &std::path::Path, done: &mut Vec<String>, code: &mut String) {
    println!("cargo:rerun-if-changed={}", path.display());
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read the Lua script {}: {e}", path.display()));
    for line in text.split_inclusive('\n') {
        let part = line
            .trim_end()
            .strip_prefix("--@")
            .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
        match part {
            Some(p) if done.iter().any(|d| d == p) => {}
            Some(p) => {
                done.push(p.to_string());
                let file = if p == "common" {
                    "lua/common.lua".into()
                } else {
                    format!("lua/part/{p}.lua")
                };
                assemble(file.as_ref(), done, code);
            }
            None => code.push_str(line),
        }
    }
}

fn static_unwinder() {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
        || var("PROFILE") != "release"
        || var("HOST") != var("TARGET")
    {
        return;
    }
    let Ok(out) = Command::new("cc")
        .arg("-print-file-name=libgcc_eh.a")
        .output()
    else {
        return;
    };
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let path = std::path::Path::new(&path);
    if out.status.success() && path.is_absolute() && path.exists() {
        if let Some(dir) = path.parent() {
            println!("cargo:rustc-link-search=native={}", dir.display());
        }
        println!("cargo:rustc-link-lib=static=gcc_eh");
    }
}
