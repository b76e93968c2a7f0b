//! `rlock release` and `rlock renew`: what an owner token does to its lock.

use clap::Args;

use rlock::duration::Span;

use super::options::TokenOpt;

#[derive(Debug, Args)]
pub(crate) struct Release {
    /// Lock name
    pub key: String,
    #[command(flatten)]
    pub token: TokenOpt,
    /// Keep the lock taken until at least this long after it was granted
    #[arg(long, value_name = "D")]
    pub min_hold: Option<Span>,
}

#[derive(Debug, Args)]
pub(crate) struct Renew {
    /// Lock name
    pub key: String,
    #[command(flatten)]
    pub token: TokenOpt,
    /// New TTL, counted from now
    #[arg(long, default_value = "30s", value_name = "D")]
    pub ttl: Span,
}
