//! stdout, which may have been closed when rlock started.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// rlock was started with stdout closed (`rlock acquire k >&-`). The
/// descriptor is /dev/null since (see `main`), where every write succeeds:
/// whatever rlock prints there is lost, and a token printed there would
/// leave a lock nobody can release. So printing fails as on a closed pipe
/// (exit 70), and `acquire` asks for nothing.
pub(crate) static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// stdout, unless it was closed when rlock started (see [`STDOUT_CLOSED`]).
pub(crate) fn stdout() -> std::io::Result<std::io::StdoutLock<'static>> {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::BrokenPipe,
            "it was closed when rlock started",
        ));
    }
    Ok(std::io::stdout().lock())
}

/// Write `text` to stdout. Not print!, which panics when stdout is a
/// closed pipe (`rlock status k | true`): that is an error like any other.
pub(crate) fn print(text: &str) -> anyhow::Result<()> {
    stdout()
        .and_then(|mut out| out.write_all(text.as_bytes()).and_then(|_| out.flush()))
        .map_err(|e| anyhow::anyhow!("cannot write to stdout: {e}"))
}
