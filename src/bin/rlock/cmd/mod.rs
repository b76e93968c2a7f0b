//! One function per subcommand; [`run`] dispatches.

mod acquire;
mod breaking;
mod exec;
mod exporter;
mod history;
mod metrics;
mod query;
mod release;
mod top;

use rlock::Mode;

use crate::cli::{self, Cli, Command, RwMode};
use crate::setup::request;

/// Run the subcommand `cli` names; its exit code, or the error to report.
pub(crate) fn run(cli: Cli) -> anyhow::Result<u8> {
    let g = &cli.global;
    // Bad input is reported as such, before any connection is tried.
    if let Some(key) = cli.command.key() {
        rlock::lock::LockName::new(&g.prefix, key)?;
    }
    match &cli.command {
        Command::Acquire(cli::Acquire {
            key,
            more,
            lock,
            slots,
            keep,
        }) => {
            let keys = lock_set(g, key, more)?;
            let req = request(lock, slots.limit, Mode::Exclusive)?;
            let keep = acquire::keeper(g, keep)?;
            if more.is_empty() {
                acquire::print_token(g, key, req, keep)
            } else {
                acquire::print_tokens(g, &keys, req, keep)
            }
        }
        Command::Exec(cli::Exec {
            key,
            also,
            lock,
            slots,
            run,
            flock,
            command,
        }) => {
            let keys = lock_set(g, key, also)?;
            flock.refuse(key, command).map_err(rlock::Error::invalid)?;
            let mode = if flock.shared {
                Mode::Read
            } else {
                Mode::Exclusive
            };
            let req = request(lock, slots.limit, mode)?;
            exec::exec(g, &keys, req, run, &flock.command(command))
        }
        Command::Rw(cli::Rw {
            mode,
            key,
            also,
            lock,
            run,
            command,
        }) => {
            let keys = lock_set(g, key, also)?;
            let mode = match mode {
                RwMode::Read => Mode::Read,
                RwMode::Write => Mode::Write,
            };
            let req = request(lock, 1, mode)?;
            if command.is_empty() {
                if run.max_hold.is_some() {
                    return Err(rlock::Error::invalid(
                        "--max-hold needs a command to stop (rlock rw MODE KEY -- CMD); \
                         a lock taken without one is held until released",
                    )
                    .into());
                }
                if also.is_empty() {
                    acquire::print_token(g, key, req, None)
                } else {
                    acquire::print_tokens(g, &keys, req, None)
                }
            } else {
                exec::exec(g, &keys, req, run, command)
            }
        }
        Command::Release(cli::Release {
            key,
            token,
            min_hold,
        }) => release::release(g, key, token.token.as_deref(), min_hold.map(|d| d.0)),
        Command::Renew(cli::Renew { key, token, ttl }) => {
            release::renew(g, key, token.token.as_deref(), ttl.0)
        }
        Command::Check(cli::Check { key, token, json }) => {
            query::check(g, key, token.token.as_deref(), *json)
        }
        Command::Status(cli::Status { key, json }) => query::status(g, key, *json),
        Command::History(h) => history::history(g, h),
        Command::Break(cli::Break {
            key,
            reason,
            holder,
            yes,
        }) => breaking::break_lock(g, key, reason, holder.as_deref(), *yes),
        Command::Doctor(cli::Doctor { ttl, role, json }) => {
            query::doctor(g, ttl.0, role.as_deref(), *json)
        }
        Command::List(cli::List { pattern, json }) => query::list(g, pattern, *json),
        Command::Top(t) => top::top(g, t),
        Command::Metrics(m) => metrics::metrics(g, m),
    }
}

/// The locks one command names, `key` then `more` (`acquire a b`, `exec a
/// --and b`): each a valid name, none twice, not too many. Checked before
/// any connection is tried.
fn lock_set(g: &crate::cli::Global, key: &str, more: &[String]) -> anyhow::Result<Vec<String>> {
    let mut keys = vec![key.to_string()];
    keys.extend_from_slice(more);
    for k in more {
        rlock::lock::LockName::new(&g.prefix, k)?;
    }
    rlock::lock::set::check_keys(&keys)?;
    Ok(keys)
}
