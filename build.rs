//! Build-time work that would otherwise cost every run.
//!
//! 1. The SHA1 of each Lua script as `src/lock/script.rs` sends it (with
//!    `lua/common.lua` put in, and bare), for EVALSHA: hashing the ~25 KB
//!    of acquire + release with sha1_smol at run time cost ~45 µs of every
//!    `rlock exec`. Exported as `RLOCK_LUA_SHA_<file>` and
//!    `RLOCK_LUA_SHA_BARE_<file>`; debug builds check each against the
//!    run-time hash.
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
    lua_hashes();
    static_unwinder();
}

fn lua_hashes() {
    println!("cargo:rerun-if-changed=lua");
    let read = |p: &std::path::Path| std::fs::read(p).expect("read a Lua script");
    let common = read("lua/common.lua".as_ref());
    let mut files: Vec<_> = std::fs::read_dir("lua")
        .expect("lua/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "lua"))
        .collect();
    files.sort();
    // As src/lock/script.rs builds them: a "bare" script as it is; else
    // lua/common.lua at the script's `--@common` line, or first.
    let here = b"--@common\n";
    let sha = |parts: &[&[u8]]| {
        let mut h = sha1_smol::Sha1::new();
        for p in parts {
            h.update(p);
        }
        h.digest().to_string()
    };
    for path in files {
        println!("cargo:rerun-if-changed={}", path.display());
        let file = read(&path);
        let with = match file.windows(here.len()).position(|w| w == here) {
            Some(i) => sha(&[&file[..i], &common, &file[i + here.len()..]]),
            None => sha(&[&common, &file]),
        };
        let name = path.file_name().expect("a file").to_string_lossy();
        println!("cargo:rustc-env=RLOCK_LUA_SHA_{name}={with}");
        println!(
            "cargo:rustc-env=RLOCK_LUA_SHA_BARE_{name}={}",
            sha(&[&file])
        );
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
