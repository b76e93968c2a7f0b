//! Signals while waiting for a lock.
//!
//! Policy: INT, TERM, HUP and QUIT received while `acquire` waits stop the
//! wait. The signal thread only flags the waiter and pokes its wake-up list
//! in Redis; the waiting thread then leaves the queue itself (and releases
//! the lock if it was granted in the same instant) and reports
//! `Error::Interrupted(sig)`, which the binary turns into exit 128+sig. So a
//! Ctrl-C never leaves a grant or a queue entry behind, and no Redis state is
//! changed from two threads at once.

use std::thread::Scope;

use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};

use crate::{Cancel, Error, Result};

/// Stops the signal thread when dropped.
pub struct Guard(Handle);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Watch INT/TERM/HUP/QUIT on a thread of `scope` and cancel `cancel` when one
/// arrives. Drop the guard to stop watching.
pub fn cancel_on_signals<'s, 'e: 's>(
    scope: &'s Scope<'s, 'e>,
    cancel: &'e Cancel,
) -> Result<Guard> {
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT])
        .map_err(|e| Error::Protocol(format!("cannot install signal handlers: {e}")))?;
    let handle = signals.handle();
    scope.spawn(move || {
        if let Some(sig) = signals.forever().next() {
            cancel.cancel(sig);
        }
    });
    Ok(Guard(handle))
}
