//! The quorum and its masters: one node each, the ticket queue that makes
//! calls take their turns on a master in the order they were made, and
//! what a quorum and its detached copies learn about the masters as they
//! go.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::identity::Id;
use crate::conn::Server;
use crate::lock::{Backend, HistoryLimits, Node};

/// Longest wait for one master's answer (connect and reply each).
pub(super) const NODE_TIMEOUT: Duration = Duration::from_millis(500);

/// What a call does about a master still busy with an earlier call.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Turn {
    Skip,
    Queue,
}

/// One master, and the order in which calls take their turns on it.
pub(super) struct Master {
    pub(super) node: Mutex<Node>,
    turns: Mutex<Turns>,
    turn_done: Condvar,
}

/// Tickets handed out, and tickets served.
#[derive(Default)]
struct Turns {
    issued: u64,
    done: u64,
}

/// Serves the next ticket when dropped (also when the call panics).
pub(super) struct TurnGuard<'a>(&'a Master);

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        let mut t = self.0.turns.lock().unwrap_or_else(|e| e.into_inner());
        t.done += 1;
        self.0.turn_done.notify_all();
    }
}

impl Master {
    fn new(node: Node) -> Master {
        Master {
            node: Mutex::new(node),
            turns: Mutex::new(Turns::default()),
            turn_done: Condvar::new(),
        }
    }

    /// A place in line, taken by the calling thread, so that calls run on
    /// this master in the order they were made, whenever their threads get
    /// to run. `None` under [`Turn::Skip`] if an earlier call is still
    /// under way or waiting.
    pub(super) fn take_turn(&self, turn: Turn) -> Option<u64> {
        let mut t = self.turns.lock().unwrap_or_else(|e| e.into_inner());
        if turn == Turn::Skip && t.issued != t.done {
            return None;
        }
        t.issued += 1;
        Some(t.issued - 1)
    }

    /// Wait until every earlier ticket has been served.
    pub(super) fn wait_turn(&self, ticket: u64) -> TurnGuard<'_> {
        let mut t = self.turns.lock().unwrap_or_else(|e| e.into_inner());
        while t.done != ticket {
            t = self.turn_done.wait(t).unwrap_or_else(|e| e.into_inner());
        }
        TurnGuard(self)
    }
}

/// What a quorum and its detached copies learn as they go.
pub(super) struct Shared {
    pub(super) ids: Vec<Id>,
    /// Set once two URLs turned out to reach one server: every call fails.
    pub(super) twins: Option<String>,
    /// Whether any call has talked to the masters yet.
    pub(super) contacted: bool,
    /// The highest fencing counter any master has shown.
    pub(super) floor: u64,
}

pub(super) fn state(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) fn lock(node: &Mutex<Node>) -> MutexGuard<'_, Node> {
    node.lock().unwrap_or_else(|e| e.into_inner())
}

/// RedLock over independent masters (see the module doc).
pub(crate) struct Quorum {
    pub(super) masters: Vec<Arc<Master>>,
    /// The same servers, to make new nodes without touching busy ones.
    pub(super) servers: Vec<Server>,
    /// Their URLs, redacted, for messages.
    pub(super) urls: Arc<Vec<String>>,
    pub(super) prefix: String,
    /// Per-master timeout (kept here: asking a node would wait for its lock).
    pub(super) timeout: Duration,
    /// How much history each master keeps per lock (given to its node).
    pub(super) history: HistoryLimits,
    pub(super) shared: Arc<Mutex<Shared>>,
}

impl Quorum {
    pub(crate) fn new(servers: Vec<Server>, prefix: &str) -> Quorum {
        let timeout = servers
            .iter()
            .map(|s| s.timeout)
            .min()
            .unwrap_or(NODE_TIMEOUT);
        let shared = Arc::new(Mutex::new(Shared {
            ids: vec![Id::Unknown; servers.len()],
            twins: None,
            contacted: false,
            floor: 0,
        }));
        Quorum::with_timeout(servers, prefix, timeout, shared)
    }

    pub(super) fn with_timeout(
        servers: Vec<Server>,
        prefix: &str,
        timeout: Duration,
        shared: Arc<Mutex<Shared>>,
    ) -> Quorum {
        let timeout = timeout.min(NODE_TIMEOUT);
        let masters = servers
            .iter()
            .map(|s| {
                let mut n = Node::new(s.clone(), prefix).without_resends();
                n.set_timeout(timeout);
                Arc::new(Master::new(n))
            })
            .collect();
        Quorum {
            masters,
            urls: Arc::new(servers.iter().map(|s| s.url.clone()).collect()),
            servers,
            prefix: prefix.to_string(),
            timeout,
            history: HistoryLimits::default(),
            shared,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.masters.len()
    }

    pub(super) fn majority(&self) -> usize {
        super::tally::majority(self.masters.len())
    }

    pub(super) fn all(&self) -> Vec<bool> {
        vec![true; self.len()]
    }
}
