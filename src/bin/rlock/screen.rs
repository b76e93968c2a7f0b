//! The terminal for `top`: the alternate screen, keys read one at a time
//! without echo, the cursor hidden, and everything put back when the
//! [`Screen`] is dropped (on q, a signal, or an error: `top` takes signals
//! through a signalfd and returns, so the drop always runs; the release
//! build aborts on a panic, but nothing in the loop panics).
//!
//! Frames are drawn without clearing the screen (which flickers): each
//! frame is one write that homes the cursor, writes each line followed by
//! clear-to-end-of-line, and clears below the last line. Lines are cut to
//! the terminal's width beforehand ([`crate::frame`]), so none wraps.

use std::io::Write;
use std::os::fd::RawFd;

/// Enter the alternate screen, hide the cursor.
const ENTER: &str = "\x1b[?1049h\x1b[?25l";
/// Show the cursor, leave the alternate screen.
const LEAVE: &str = "\x1b[?25h\x1b[?1049l";

/// Is `fd` a terminal?
pub(crate) fn is_tty(fd: RawFd) -> bool {
    // SAFETY: isatty only looks at the descriptor.
    unsafe { libc::isatty(fd) == 1 }
}

/// The terminal on stdout, set up for `top` until dropped.
pub(crate) struct Screen {
    /// stdin's terminal settings before, when stdin is a terminal whose
    /// keys we read.
    saved: Option<libc::termios>,
}

impl Screen {
    /// Take over the terminal: keys from stdin (when it is a terminal)
    /// arrive one at a time, unechoed; Ctrl-C still sends SIGINT (ISIG is
    /// kept), which `top` takes from its signalfd.
    pub(crate) fn enter() -> std::io::Result<Screen> {
        let mut saved = None;
        if is_tty(libc::STDIN_FILENO) {
            // SAFETY: termios is plain data that tcgetattr fills.
            let mut t: libc::termios = unsafe { std::mem::zeroed() };
            // SAFETY: a valid descriptor and a valid pointer.
            if unsafe { libc::tcgetattr(libc::STDIN_FILENO, &mut t) } == 0 {
                saved = Some(t);
                let mut raw = t;
                raw.c_lflag &= !(libc::ICANON | libc::ECHO);
                raw.c_cc[libc::VMIN] = 1;
                raw.c_cc[libc::VTIME] = 0;
                // SAFETY: as above; TCSAFLUSH drops keys typed before.
                unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSAFLUSH, &raw) };
            }
        }
        let screen = Screen { saved };
        write_all(ENTER)?;
        Ok(screen)
    }

    /// Draw `lines` over the last frame, in one write; `resized`: the
    /// terminal's size changed since, so clear it first (a terminal that
    /// re-wrapped the old rows on shrinking, as tmux does, would otherwise
    /// keep their wrap marks under the new frame).
    pub(crate) fn draw(&self, lines: &[String], resized: bool) -> std::io::Result<()> {
        let mut buf = String::from(if resized { "\x1b[H\x1b[2J" } else { "\x1b[H" });
        for (i, l) in lines.iter().enumerate() {
            if i > 0 {
                buf.push_str("\r\n");
            }
            buf.push_str(l);
            buf.push_str("\x1b[K");
        }
        buf.push_str("\x1b[J");
        write_all(&buf)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = write_all(LEAVE);
        if let Some(t) = &self.saved {
            // SAFETY: restores the settings read in `enter`.
            unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSADRAIN, t) };
        }
    }
}

fn write_all(s: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(s.as_bytes())?;
    out.flush()
}

/// The terminal's size on stdout (columns, rows); 80x24 if it does not say.
pub(crate) fn size() -> (usize, usize) {
    // SAFETY: winsize is plain data that the ioctl fills.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize through the valid pointer.
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) };
    if rc != 0 || ws.ws_col == 0 || ws.ws_row == 0 {
        return (80, 24);
    }
    (usize::from(ws.ws_col), usize::from(ws.ws_row))
}

/// Keys typed on stdin, without blocking: the bytes read (none at end of
/// input or when nothing is there).
pub(crate) fn read_keys() -> Vec<u8> {
    let mut buf = [0u8; 64];
    // SAFETY: reads at most buf.len() bytes into buf.
    let n = unsafe { libc::read(libc::STDIN_FILENO, buf.as_mut_ptr().cast(), buf.len()) };
    usize::try_from(n).map_or_else(|_| Vec::new(), |n| buf[..n].to_vec())
}
