//! The Lua scripts as build.rs assembles them (tests that send a script
//! by hand: a `--@<part>` line is lua/part/<part>.lua, `--@common`
//! lua/common.lua, each part once per script, where first named).

/// lua/`file` as rlock sends it.
pub fn lua_script(file: &str) -> String {
    let mut code = String::new();
    assemble(&format!("lua/{file}"), &mut Vec::new(), &mut code);
    code
}

fn assemble(path: &str, done: &mut Vec<String>, code: &mut String) {
    let full = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"));
    for line in text.split_inclusive('\n') {
        match line.trim_end().strip_prefix("--@") {
            Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') => {
                if !done.iter().any(|d| d == p) {
                    done.push(p.to_string());
                    let file = if p == "common" {
                        "lua/common.lua".to_string()
                    } else {
                        format!("lua/part/{p}.lua")
                    };
                    assemble(&file, done, code);
                }
            }
            _ => code.push_str(line),
        }
    }
}
