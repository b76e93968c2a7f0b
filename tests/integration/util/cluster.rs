//! Redis Cluster: creating one, and killing nodes to fail it over.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{CLUSTER_NODE, CLUSTER_NODE_FAST, Redis, kill, query, quick_conn};
use rlock_test_support as redis_server;

/// Make the servers (started with [`CLUSTER_NODE`]) one Redis Cluster.
pub fn create_cluster(nodes: &[&Redis]) -> Result<(), String> {
    redis_server::create_cluster(&nodes.iter().map(|r| &***r).collect::<Vec<_>>())
}

/// Make the servers one Redis Cluster with `replicas` replicas per master.
pub fn create_cluster_with_replicas(nodes: &[&Redis], replicas: usize) -> Result<(), String> {
    redis_server::create_cluster_with_replicas(
        &nodes.iter().map(|r| &***r).collect::<Vec<_>>(),
        replicas,
    )
}

/// A Redis Cluster of `n` masters (no replicas), each a [`Redis`]; or,
/// for the failover tests, of masters with replicas that fail over fast.
pub struct Cluster {
    pub nodes: Vec<Redis>,
    /// Nodes killed by [`Cluster::kill`]: left out of every look-up.
    dead: Mutex<Vec<usize>>,
}

/// How a failover went: times are from the SIGKILL.
#[derive(Debug)]
pub struct Failover {
    /// The master killed, and the replica promoted in its place (indexes
    /// into [`Cluster::nodes`]).
    pub killed: usize,
    pub promoted: usize,
    /// Until a survivor first reported `cluster_state:fail` (the dead
    /// master flagged FAIL, its slots unserved); None if the poll missed it.
    pub down_after: Option<Duration>,
    /// Until the replica first reported `role:master`.
    pub promoted_after: Duration,
    /// Until every survivor reported `cluster_state:ok` and named the
    /// replica as the master of the slot.
    pub ok_after: Duration,
}

impl std::fmt::Display for Failover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: Duration| d.as_millis();
        write!(f, "node {} SIGKILLed; ", self.killed)?;
        match self.down_after {
            Some(d) => write!(f, "cluster_state:fail after {} ms, ", ms(d))?,
            None => write!(f, "cluster_state:fail not seen, ")?,
        }
        write!(
            f,
            "node {} promoted after {} ms, cluster ok after {} ms",
            self.promoted,
            ms(self.promoted_after),
            ms(self.ok_after)
        )
    }
}

impl Cluster {
    pub fn start(n: usize) -> Cluster {
        let nodes: Vec<Redis> = (0..n).map(|_| Redis::start_with(&CLUSTER_NODE)).collect();
        create_cluster(&nodes.iter().collect::<Vec<_>>()).unwrap();
        Cluster {
            nodes,
            dead: Mutex::new(Vec::new()),
        }
    }

    /// `masters` masters with `replicas` replicas each, with
    /// `cluster-node-timeout 1000`, ready when every node is ok and every
    /// replica connected to its master.
    pub fn start_with_replicas(masters: usize, replicas: usize) -> Cluster {
        let nodes: Vec<Redis> = (0..masters * (1 + replicas))
            .map(|_| Redis::start_with(&CLUSTER_NODE_FAST))
            .collect();
        create_cluster_with_replicas(&nodes.iter().collect::<Vec<_>>(), replicas).unwrap();
        Cluster {
            nodes,
            dead: Mutex::new(Vec::new()),
        }
    }

    /// Seed URLs, comma-separated.
    pub fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(Redis::url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Every node's URL, node `first` first and the others in order.
    pub fn urls_from(&self, first: usize) -> String {
        std::iter::once(first)
            .chain((0..self.nodes.len()).filter(|&i| i != first))
            .map(|i| self.nodes[i].url())
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn is_dead(&self, i: usize) -> bool {
        self.dead.lock().unwrap().contains(&i)
    }

    /// Indexes of the nodes not killed.
    pub fn alive(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| !self.is_dead(i))
            .collect()
    }

    fn index_of(&self, port: u16) -> usize {
        self.nodes
            .iter()
            .position(|r| r.port == port)
            .unwrap_or_else(|| panic!("no node on port {port}"))
    }

    /// The slot of lock `key`: that of its main key `rlock:{key}` (every
    /// key of the lock shares the `{key}` hash tag).
    pub fn keyslot(&self, key: &str) -> u16 {
        let lock_key = format!("rlock:{{{key}}}");
        self.alive()
            .into_iter()
            .find_map(|i| query(self.nodes[i].port, &["CLUSTER", "KEYSLOT", &lock_key]))
            .expect("no node answers CLUSTER KEYSLOT")
    }

    /// Port of the master of `slot` according to the node on `port`.
    fn slot_master(port: u16, slot: u16) -> Option<u16> {
        // Each range is [start, end, [host, port, id, ...], replicas...].
        let ranges: Vec<Vec<redis::Value>> = query(port, &["CLUSTER", "SLOTS"])?;
        ranges.into_iter().find_map(|r| {
            let start: u16 = redis::FromRedisValue::from_redis_value(r.first()?.clone()).ok()?;
            let end: u16 = redis::FromRedisValue::from_redis_value(r.get(1)?.clone()).ok()?;
            if !(start..=end).contains(&slot) {
                return None;
            }
            let node: Vec<redis::Value> =
                redis::FromRedisValue::from_redis_value(r.get(2)?.clone()).ok()?;
            redis::FromRedisValue::from_redis_value(node.get(1)?.clone()).ok()
        })
    }

    /// The master node now serving lock `key`'s slot (as the first live
    /// node that answers sees it).
    pub fn master_of(&self, key: &str) -> usize {
        let slot = self.keyslot(key);
        let port = self
            .alive()
            .into_iter()
            .find_map(|i| Cluster::slot_master(self.nodes[i].port, slot))
            .expect("no node answers CLUSTER SLOTS");
        self.index_of(port)
    }

    /// The live replicas of node `master`, by their own INFO replication.
    pub fn replicas_of(&self, master: usize) -> Vec<usize> {
        let port = format!("master_port:{}\r", self.nodes[master].port);
        self.alive()
            .into_iter()
            .filter(|&i| {
                query::<String>(self.nodes[i].port, &["INFO", "replication"])
                    .is_some_and(|s| s.contains("role:slave") && s.contains(&port))
            })
            .collect()
    }

    /// A read-only command on node `i`, answered there even if it is a
    /// replica (READONLY first); None if it fails.
    pub fn read<T: redis::FromRedisValue>(&self, i: usize, args: &[&str]) -> Option<T> {
        let mut c = quick_conn(self.nodes[i].port)?;
        redis::cmd("READONLY").query::<()>(&mut c).ok()?;
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut c).ok()
    }

    /// Whether `key` (a Redis key) is on node `i`, replica or master.
    pub fn has_key(&self, i: usize, key: &str) -> bool {
        self.read::<i64>(i, &["EXISTS", key]) == Some(1)
    }

    /// SIGKILL node `i`; it is left out of every look-up from now on.
    pub fn kill(&self, i: usize) {
        self.dead.lock().unwrap().push(i);
        kill(self.nodes[i].child_pid(), libc::SIGKILL);
    }

    /// SIGKILL the master serving lock `key` and wait until one of its
    /// replicas is promoted and every survivor reports `cluster_state:ok`
    /// and names that replica as the slot's master.
    pub fn kill_master_of(&self, key: &str) -> Failover {
        let slot = self.keyslot(key);
        let killed = self.master_of(key);
        let replicas = self.replicas_of(killed);
        assert!(
            !replicas.is_empty(),
            "node {killed} (master of {key:?}) has no replica"
        );
        self.kill(killed);
        let started = Instant::now();
        let mut down_after = None;
        let mut promoted: Option<(usize, Duration)> = None;
        loop {
            let survivors = self.alive();
            let states: Vec<Option<String>> = survivors
                .iter()
                .map(|&i| query::<String>(self.nodes[i].port, &["CLUSTER", "INFO"]))
                .collect();
            let elapsed = started.elapsed();
            if down_after.is_none()
                && states
                    .iter()
                    .any(|s| s.as_ref().is_some_and(|s| s.contains("cluster_state:fail")))
            {
                down_after = Some(elapsed);
            }
            if promoted.is_none() {
                promoted = replicas
                    .iter()
                    .find(|&&i| {
                        query::<String>(self.nodes[i].port, &["INFO", "replication"])
                            .is_some_and(|s| s.contains("role:master"))
                    })
                    .map(|&i| (i, elapsed));
            }
            if let Some((new, promoted_after)) = promoted {
                let ok = states
                    .iter()
                    .all(|s| s.as_ref().is_some_and(|s| s.contains("cluster_state:ok")))
                    && survivors.iter().all(|&i| {
                        Cluster::slot_master(self.nodes[i].port, slot) == Some(self.nodes[new].port)
                    });
                if ok {
                    return Failover {
                        killed,
                        promoted: new,
                        down_after,
                        promoted_after,
                        ok_after: started.elapsed(),
                    };
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "no failover of node {killed} within 30 s (promoted: {promoted:?})"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
