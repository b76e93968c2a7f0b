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
    let Some(j) = learn(&mut s.ids, i, id) else {
        return Ok(());
    };
    let msg = twins_message(urls, i, j);
    s.twins.get_or_insert_with(|| msg.clone());
    Err(Error::invalid(msg))
}

/// Record that master `i` is the server with run_id `id` (`None`: it does
/// not say), and return the other master already known to be that server,
/// if any. Master `i` itself may be known already: a quorum and its
/// detached copy (exec's renewer) have a connection each, and both may
/// ask a master that was unknown when each call began.
fn learn(ids: &mut [Id], i: usize, id: Option<String>) -> Option<usize> {
    let Some(id) = id else {
        ids[i] = Id::Unknowable;
        return None;
    };
    let known = Id::Known(id);
    let twin = (0..ids.len()).find(|&j| j != i && ids[j] == known);
    ids[i] = known;
    twin
}

/// The refusal of masters `i` and `j`, one server named twice: their
/// URLs (redacted) in the order they were given.
fn twins_message(urls: &[String], i: usize, j: usize) -> String {
    let (a, b) = (i.min(j), i.max(j));
    format!(
        "{} and {} reach the same Redis server (same run_id); RedLock needs independent \
         masters: give each once",
        urls[a], urls[b]
    )
}

impl Quorum {
    /// Fails once two URLs turned out to reach one server.
    pub(super) fn check_twins(&self) -> Result<()> {
        match &state(&self.shared).twins {
            Some(msg) => Err(Error::invalid(msg.clone())),
            None => Ok(()),
        }
    }

    /// How many masters have answered this process (and said who they
    /// are, or that they do not say).
    pub(super) fn known(&self) -> usize {
        state(&self.shared)
            .ids
            .iter()
            .filter(|id| **id != Id::Unknown)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(id: &str) -> Id {
        Id::Known(id.into())
    }

    #[test]
    fn a_new_server_is_recorded_and_has_no_twin() {
        let mut ids = vec![Id::Unknown; 3];
        assert_eq!(learn(&mut ids, 1, Some("a".into())), None);
        assert_eq!(learn(&mut ids, 0, Some("b".into())), None);
        assert!(ids == [known("b"), known("a"), Id::Unknown]);
    }

    #[test]
    fn a_server_already_known_is_a_twin() {
        let mut ids = vec![known("a"), Id::Unknown, known("b")];
        assert_eq!(learn(&mut ids, 1, Some("b".into())), Some(2));
        assert!(ids[1] == known("b"));
    }

    #[test]
    fn a_server_that_does_not_say_is_no_ones_twin() {
        let mut ids = vec![Id::Unknowable, Id::Unknown, Id::Unknown];
        assert_eq!(learn(&mut ids, 1, None), None);
        assert!(ids[1] == Id::Unknowable);
        // Two masters that do not say are not taken for one server.
        assert_eq!(learn(&mut ids, 2, None), None);
        // Nor is an unknown one (not asked yet) anyone's twin.
        let mut ids = vec![Id::Unknown, Id::Unknown];
        assert_eq!(learn(&mut ids, 0, Some("a".into())), None);
    }

    #[test]
    fn a_master_identified_twice_is_not_its_own_twin() {
        let mut ids = vec![known("a"), Id::Unknown];
        assert_eq!(learn(&mut ids, 0, Some("a".into())), None);
        assert!(ids[0] == known("a"));
    }

    #[test]
    fn twins_are_named_in_the_order_given() {
        let urls: Vec<String> = ["redis://a:1", "redis://b:2", "redis://***@c:3"]
            .map(String::from)
            .into();
        let msg = twins_message(&urls, 2, 0);
        assert_eq!(msg, twins_message(&urls, 0, 2));
        assert!(
            msg.starts_with("redis://a:1 and redis://***@c:3 reach the same Redis server"),
            "{msg}"
        );
    }
}
