//! Text from Redis as rlock shows it: lock names, commands, reasons, host
//! and user names were written by whoever took or waited for a lock, and a
//! terminal must not obey them. Every renderer (`status`, `list`, `top`,
//! `history`, the `break` prompt) passes such text through [`shown`].

/// `s` with every control character (C0, DEL, C1) and every bidirectional
/// formatting character (U+061C, U+200E, U+200F, U+202A..U+202E,
/// U+2066..U+2069) written as an escape: `\r`, `\n`, `\t`, `\x1b` below
/// U+0080, `\u{202e}` above. Everything else, backslashes included, is
/// shown as it is.
pub(crate) fn shown(s: &str) -> String {
    if !s.chars().any(escaped) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\r' => out.push_str(r"\r"),
            '\n' => out.push_str(r"\n"),
            '\t' => out.push_str(r"\t"),
            c if escaped(c) && (c as u32) < 0x80 => {
                out.push_str(&format!(r"\x{:02x}", c as u32));
            }
            c if escaped(c) => out.push_str(&format!(r"\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Is `c` written as an escape by [`shown`]?
fn escaped(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_marks_are_escaped() {
        assert_eq!(shown("deploy-prod"), "deploy-prod");
        assert_eq!(shown("a\x1b[2Jb"), r"a\x1b[2Jb");
        assert_eq!(shown("ok\rFAKE"), r"ok\rFAKE");
        assert_eq!(shown("l1\nl2\tx"), r"l1\nl2\tx");
        assert_eq!(shown("\x7f\u{9b}"), r"\x7f\u{9b}");
        assert_eq!(shown("abc\u{202e}fed"), r"abc\u{202e}fed");
        assert_eq!(
            shown("\u{2066}\u{2069}\u{200e}\u{200f}\u{61c}"),
            r"\u{2066}\u{2069}\u{200e}\u{200f}\u{61c}"
        );
        // Text of any script, and backslashes, are shown as they are.
        assert_eq!(shown(r"verrou-été עברית C:\x"), r"verrou-été עברית C:\x");
    }

    #[test]
    fn nothing_shown_is_obeyed_by_a_terminal() {
        for c in (0..0x3000u32).filter_map(char::from_u32) {
            let s = shown(&format!("x{c}y"));
            assert!(!s.chars().any(escaped), "{c:?} -> {s:?}");
        }
    }
}
