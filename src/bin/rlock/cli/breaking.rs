//! `rlock break`: end a stuck lock's holds by force.

use clap::Args;

pub(crate) const AFTER_HELP: &str = "\
For an operator, when a holder hangs: breaks every hold of the lock (every
holder of a semaphore or read-write lock), or with --holder the one named.
A broken hold is not renewed any more, and stays held until its holder has
stopped and released it, or its lease ends, whichever comes first: the next
waiter never runs beside the broken holder, and waits at most one TTL.
Each broken holder finds out at its next renewal (within a third of its
TTL): `rlock exec` stops its command as for any lost lock (--on-lost: TERM
with CONT, KILL after --grace), releases, and exits 79, saying who broke the
lock and why; an `acquire --keep` keeper stops its script the same way.
`rlock status` shows the hold as being broken (by whom, since when)
meanwhile; the history records `broken`, then how the hold ended. A parked
hold (released, kept by --min-hold) has nobody to stop: it ends at once.
There is no immediate hand-over.

--holder ID: a holder as `rlock status` and `list` show it: its fence
(`fence 7`: --holder 7, unique per grant) or PID@HOST (every hold of that
process). An ID that matches no holder breaks nothing: exit 1.

On a terminal, asks \"break lock K held by ...? [y/N]\" first (no: exit 1,
nothing broken); --yes skips the question, and is required when stdin is
not a terminal (64 otherwise). A free lock: \"nothing to break\", exit 0.
The breaker is recorded as user@host ($USER, $LOGNAME, else the uid's name).

Examples:
  rlock status deploy
  rlock break deploy --reason \"job 4711 hung since 02:00\"
  rlock break gpu-runners --holder 42 --reason \"runner lost its GPU\" --yes";

#[derive(Debug, Args)]
pub(crate) struct Break {
    /// Lock name
    pub key: String,
    /// Why the lock is broken: told to the broken holder, kept in the
    /// lock's history
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
    /// Only this holder: its fence as status shows it, or PID@HOST
    #[arg(long, value_name = "ID")]
    pub holder: Option<String>,
    /// Do not ask for confirmation (required without a terminal)
    #[arg(short = 'y', long)]
    pub yes: bool,
}
