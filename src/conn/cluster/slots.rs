//! The CLUSTER SLOTS reply: which master serves which slots, with how
//! many replicas. `Conn::scan` walks the masters; `rlock doctor` checks
//! that every slot has one.

use redis::FromRedisValue;

/// A CLUSTER SLOTS reply: which master serves which slots.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ClusterSlots {
    pub(crate) ranges: Vec<SlotRange>,
}

/// Slots `start..=end`, and the master that serves them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SlotRange {
    pub(crate) start: u16,
    pub(crate) end: u16,
    pub(crate) master: Master,
}

/// A master of a cluster: where it is, and how many replicas it has.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Master {
    pub(crate) host: String,
    pub(crate) port: u16,
    /// The replicas CLUSTER SLOTS lists with it (for a master in several
    /// ranges, the fewest any of its ranges lists).
    pub(crate) replicas: usize,
}

impl ClusterSlots {
    /// Parses a CLUSTER SLOTS reply. Each range is
    /// `[start, end, [host, port, id, ...], replica...]`, each replica
    /// shaped like the master; what Redis 7 adds after the id (hostname
    /// metadata) is ignored. A range without a master, or a master without
    /// a host and port, is passed over; a value of the wrong type is an
    /// error (a reply from something that is not a cluster node).
    pub(crate) fn parse(reply: redis::Value) -> redis::RedisResult<ClusterSlots> {
        let ranges: Vec<Vec<redis::Value>> =
            FromRedisValue::from_redis_value(reply.extract_error()?)?;
        let mut out = Vec::with_capacity(ranges.len());
        for range in ranges {
            let mut it = range.into_iter();
            let (Some(start), Some(end), Some(node)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            let node: Vec<redis::Value> = FromRedisValue::from_redis_value(node)?;
            let mut node = node.into_iter();
            let (Some(host), Some(port)) = (node.next(), node.next()) else {
                continue;
            };
            out.push(SlotRange {
                start: number(start, "slot", 16383)?,
                end: number(end, "slot", 16383)?,
                master: Master {
                    host: FromRedisValue::from_redis_value(host)?,
                    port: number(port, "port", u16::MAX)?,
                    replicas: it.count(),
                },
            });
        }
        Ok(ClusterSlots { ranges: out })
    }

    /// Every master once, sorted by host and port.
    pub(crate) fn masters(&self) -> Vec<Master> {
        let mut masters: Vec<Master> = Vec::new();
        for r in &self.ranges {
            let m = &r.master;
            match masters
                .iter_mut()
                .find(|o| o.host == m.host && o.port == m.port)
            {
                Some(o) => o.replicas = o.replicas.min(m.replicas),
                None => masters.push(m.clone()),
            }
        }
        masters.sort();
        masters
    }

    /// How many of the cluster's 16384 slots have a master.
    pub(crate) fn covered(&self) -> u32 {
        self.ranges
            .iter()
            .map(|r| u32::from(r.end.saturating_sub(r.start)) + 1)
            .sum()
    }
}

/// A slot number or a port in a CLUSTER SLOTS reply, refused when out of
/// range (redis-rs would wrap an integer around into a u16).
fn number(v: redis::Value, what: &'static str, max: u16) -> redis::RedisResult<u16> {
    let n: i64 = FromRedisValue::from_redis_value(v)?;
    u16::try_from(n).ok().filter(|n| *n <= max).ok_or_else(|| {
        redis::RedisError::from((
            redis::ErrorKind::Parse,
            "CLUSTER SLOTS reply out of range",
            format!("{what} {n}"),
        ))
    })
}

#[cfg(test)]
mod tests {
    use redis::Value;

    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    /// `[host, port, id]`, as CLUSTER SLOTS lists a node.
    fn node(host: &str, port: i64) -> Value {
        Value::Array(vec![bulk(host), Value::Int(port), bulk("0123abcd")])
    }

    fn range(start: i64, end: i64, nodes: Vec<Value>) -> Value {
        let mut r = vec![Value::Int(start), Value::Int(end)];
        r.extend(nodes);
        Value::Array(r)
    }

    fn master(host: &str, port: u16, replicas: usize) -> Master {
        Master {
            host: host.into(),
            port,
            replicas,
        }
    }

    #[test]
    fn three_masters_with_replicas() {
        let reply = Value::Array(vec![
            range(
                10923,
                16383,
                vec![node("10.0.0.3", 7002), node("10.0.0.6", 7005)],
            ),
            range(
                0,
                5460,
                vec![node("10.0.0.1", 7000), node("10.0.0.4", 7003)],
            ),
            range(5461, 10922, vec![node("10.0.0.2", 7001)]),
        ]);
        let slots = ClusterSlots::parse(reply).unwrap();
        assert_eq!(
            slots.ranges[0],
            SlotRange {
                start: 10923,
                end: 16383,
                master: master("10.0.0.3", 7002, 1),
            }
        );
        assert_eq!(
            slots.masters(),
            [
                master("10.0.0.1", 7000, 1),
                master("10.0.0.2", 7001, 0),
                master("10.0.0.3", 7002, 1),
            ]
        );
        assert_eq!(slots.covered(), 16384);
    }

    #[test]
    fn a_master_of_several_ranges_is_listed_once_with_its_fewest_replicas() {
        let reply = Value::Array(vec![
            range(0, 99, vec![node("a", 1), node("r1", 1), node("r2", 1)]),
            range(100, 199, vec![node("b", 2)]),
            range(200, 299, vec![node("a", 1), node("r1", 1)]),
        ]);
        let slots = ClusterSlots::parse(reply).unwrap();
        assert_eq!(slots.ranges.len(), 3);
        assert_eq!(slots.masters(), [master("a", 1, 1), master("b", 2, 0)]);
        assert_eq!(slots.covered(), 300);
    }

    #[test]
    fn slots_without_a_master_are_not_covered() {
        let reply = Value::Array(vec![
            range(0, 0, vec![node("a", 1)]),
            range(16383, 16383, vec![node("a", 1)]),
            // No node at all, or a node without its port: passed over.
            range(1, 5000, vec![]),
            range(5001, 6000, vec![Value::Array(vec![bulk("b")])]),
        ]);
        let slots = ClusterSlots::parse(reply).unwrap();
        assert_eq!(slots.covered(), 2);
        assert_eq!(slots.masters(), [master("a", 1, 0)]);
        let empty = ClusterSlots::parse(Value::Array(vec![])).unwrap();
        assert_eq!((empty.covered(), empty.masters()), (0, vec![]));
    }

    #[test]
    fn redis_7_node_metadata_is_ignored() {
        // Redis 7: [ip, port, id, {hostname: ...}]; RESP3 may send a map.
        let meta = Value::Map(vec![(bulk("hostname"), bulk("redis-1.internal"))]);
        let n = Value::Array(vec![bulk("10.0.0.1"), Value::Int(7000), bulk("id"), meta]);
        let reply = Value::Array(vec![range(0, 16383, vec![n])]);
        let slots = ClusterSlots::parse(reply).unwrap();
        assert_eq!(slots.masters(), [master("10.0.0.1", 7000, 0)]);
    }

    #[test]
    fn a_reply_of_the_wrong_shape_is_an_error() {
        let bad_port = Value::Array(vec![bulk("h"), Value::Int(70000)]);
        for bad in [
            Value::Int(1),
            Value::Array(vec![Value::Int(3)]),
            range(0, 10, vec![bulk("not a node")]),
            Value::Array(vec![range(0, 10, vec![bad_port])]),
            Value::Array(vec![range(-1, 10, vec![node("h", 1)])]),
            Value::Array(vec![range(0, 70000, vec![node("h", 1)])]),
            Value::Array(vec![range(0, 16384, vec![node("h", 1)])]),
        ] {
            assert!(ClusterSlots::parse(bad.clone()).is_err(), "{bad:?}");
        }
        // A node that refuses says why.
        let refused =
            redis::parse_redis_value(b"-ERR This instance has cluster support disabled\r\n")
                .unwrap();
        let e = ClusterSlots::parse(refused).unwrap_err();
        assert!(e.to_string().contains("cluster support disabled"), "{e}");
    }
}
