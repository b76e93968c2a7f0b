//! Twin detection: two URLs that reach one server (127.0.0.1 and
//! localhost, a DNS alias, a unix socket) would count one master twice.
//! Each master is asked for its `run_id` the first time it answers, and a
//! second master with a known run_id is refused.

use std::sync::Mutex;

use super::masters::{Quorum, Shared, state};
use crate::lock::Node;
use crate::{Error, Result};

/// Which server a master is.
#[derive(Clone, PartialEq, Eq)]
pub(super) enum Id {
    /// Not asked yet, or it did not answer.
    Unknown,
    Known(String),
    /// It does not say (INFO refused by an ACL).
    Unknowable,
}

/// Learn which server master `i` is (once), and refuse it if another
/// master of the quorum is the same server. An unreachable master stays
/// unknown and is asked again next time.
pub(super) fn identify(
    shared: &Mutex<Shared>,
    urls: &[String],
    i: usize,
    node: &mut Node,
) -> Result<()> {
    if state(shared).ids[i] != Id::Unknown {
        return Ok(());
    }
    let id = node.run_id()?;
    let mut s = state(shared);
    let Some(id) = id else {
        s.ids[i] = Id::Unknowable;
        return Ok(());
    };
    let known = Id::Known(id);
    let twin = s.ids.iter().position(|x| *x == known);
    s.ids[i] = known;
    let Some(j) = twin else {
        return Ok(());
    };
    let (a, b) = (i.min(j), i.max(j));
    let msg = format!(
        "{} and {} reach the same Redis server (same run_id); RedLock needs independent \
         masters: give each once",
        urls[a], urls[b]
    );
    s.twins.get_or_insert_with(|| msg.clone());
    Err(Error::Usage(msg))
}

impl Quorum {
    /// Fails once two URLs turned out to reach one server.
    pub(super) fn check_twins(&self) -> Result<()> {
        match &state(&self.shared).twins {
            Some(msg) => Err(Error::Usage(msg.clone())),
            None => Ok(()),
        }
    }
}
