//! Replication and Sentinel: a synced replica, three Sentinels.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Redis, SEQ, eventually, free_port, kill, query};
use rlock_test_support as redis_server;

/// A replica of `master`, in sync.
pub fn replica_of(master: &Redis) -> Redis {
    let replica = Redis::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    eventually(Duration::from_secs(10), "the replica to sync", || {
        let info: String = replica.cmd(&["INFO", "replication"]);
        info.contains("master_link_status:up")
    });
    // And the master to count it: until it sees the replica online (its
    // first REPLCONF ACK), WAIT counts nobody, and a --min-replicas grant
    // right after this would fail under load.
    eventually(
        Duration::from_secs(10),
        "the master to see its replica",
        || {
            let info: String = master.cmd(&["INFO", "replication"]);
            info.contains("state=online")
        },
    );
    replica
}

/// A master, one replica and three Sentinels watching them as "mymaster".
pub struct Sentinels {
    pub master: Redis,
    pub replica: Redis,
    sentinels: Vec<(Child, u16, PathBuf)>,
}

impl Sentinels {
    pub fn start() -> Sentinels {
        let master = Redis::start();
        let mport = master.port.to_string();
        let replica = replica_of(&master);
        // Three different ports: a port free_port found is free again
        // until its Sentinel binds it, so the next call may return it too.
        let mut ports: Vec<u16> = Vec::new();
        while ports.len() < 3 {
            let p = free_port();
            if !ports.contains(&p) && p != master.port && p != replica.port {
                ports.push(p);
            }
        }
        let sentinels = (0..3)
            .map(|i| {
                let port = ports[i];
                let dir = rlock_test_support::scratch_dir(&format!(
                    "sentinel-{}-{i}",
                    SEQ.fetch_add(1, Ordering::SeqCst)
                ));
                let conf = dir.join("sentinel.conf");
                std::fs::write(
                    &conf,
                    format!(
                        "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor mymaster 127.0.0.1 {mport} 2\n\
                         sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 5000\n",
                        dir.display()
                    ),
                )
                .unwrap();
                let child = Command::new(redis_server::server_bin())
                    .arg(&conf)
                    .arg("--sentinel")
                    .args(["--logfile", dir.join("sentinel.log").to_str().unwrap()])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
                (child, port, dir)
            })
            .collect();
        let s = Sentinels {
            master,
            replica,
            sentinels,
        };
        // Ready when every Sentinel is connected to the replica and has its
        // INFO: flags exactly "slave" (not "slave,disconnected").
        eventually(
            Duration::from_secs(20),
            "the sentinels to see the replica",
            || {
                s.sentinels.iter().all(|(_, port, _)| {
                    let replicas: redis::RedisResult<Vec<Vec<String>>> =
                        redis::Client::open(format!("redis://127.0.0.1:{port}"))
                            .and_then(|c| c.get_connection())
                            .and_then(|mut c| {
                                redis::cmd("SENTINEL")
                                    .arg("replicas")
                                    .arg("mymaster")
                                    .query(&mut c)
                            });
                    replicas.is_ok_and(|r| {
                        r.iter()
                            .any(|f| f.windows(2).any(|w| w[0] == "flags" && w[1] == "slave"))
                    })
                })
            },
        );
        s
    }

    pub fn urls(&self) -> String {
        self.sentinels
            .iter()
            .map(|(_, port, _)| format!("redis://127.0.0.1:{port}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The Sentinels' ports, in the order of [`Sentinels::urls`].
    pub fn ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|(_, port, _)| *port).collect()
    }

    /// Port of the master the first Sentinel names now.
    pub fn master_port(&self) -> u16 {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{}", self.sentinels[0].1))
            .unwrap()
            .get_connection()
            .unwrap();
        let (_, port): (String, u16) = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg("mymaster")
            .query(&mut c)
            .unwrap();
        port
    }

    pub fn freeze_first(&self) {
        kill(self.sentinels[0].0.id(), libc::SIGSTOP);
    }

    pub fn thaw_first(&self) {
        kill(self.sentinels[0].0.id(), libc::SIGCONT);
    }

    /// Make the replica the master, and wait until the Sentinels say so.
    pub fn failover(&self) {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{}", self.sentinels[0].1))
            .unwrap()
            .get_connection()
            .unwrap();
        let _: () = redis::cmd("SENTINEL")
            .arg("failover")
            .arg("mymaster")
            .query(&mut c)
            .unwrap();
        eventually(Duration::from_secs(20), "the failover", || {
            // The Sentinels kill the promoted replica's clients: tolerate a
            // reset connection while polling, in the connect too (`conn()`
            // panics on one: "Connection reset by peer" failed CI once).
            self.master_port() == self.replica.port
                && query::<String>(self.replica.port, &["INFO", "replication"])
                    .is_some_and(|r| r.contains("role:master"))
        });
    }
}

impl Sentinels {
    /// The master port Sentinel `i` names now, if it answers.
    fn named_by(&self, i: usize) -> Option<u16> {
        let (_, port): (String, u16) = query(
            self.sentinels[i].1,
            &["SENTINEL", "get-master-addr-by-name", "mymaster"],
        )?;
        Some(port)
    }

    /// A crash failover: SIGKILL the master's redis-server, and wait until
    /// every Sentinel names the replica as the master and the replica
    /// reports `role:master`. Returns how long that took from the kill.
    pub fn crash_master(&self) -> Duration {
        kill(self.master.child_pid(), libc::SIGKILL);
        let started = Instant::now();
        eventually(Duration::from_secs(30), "the crash failover", || {
            (0..self.sentinels.len()).all(|i| self.named_by(i) == Some(self.replica.port))
                && query::<String>(self.replica.port, &["INFO", "replication"])
                    .is_some_and(|r| r.contains("role:master"))
        });
        started.elapsed()
    }
}

impl Drop for Sentinels {
    fn drop(&mut self) {
        for (child, _, dir) in &mut self.sentinels {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
