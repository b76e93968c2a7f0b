//! The report: findings, their severities, and how they are shown.

#[allow(clippy::wildcard_imports)]
use super::*;

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Checked and fine.
    Ok,
    /// Worth knowing; no risk to the locks.
    Info,
    /// A risk under some failures, or a cost; worth a change.
    Warn,
    /// Locks can be granted twice, or lost, in this setup.
    Unsafe,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Ok => "ok",
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Unsafe => "unsafe",
        })
    }
}

/// One thing found, on one server (or on the whole deployment).
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    /// How bad it is.
    pub severity: Severity,
    /// The server it is about (host:port, socket path, "cluster via ...",
    /// "RedLock"); never a password.
    pub server: String,
    /// What was checked: version, eviction, memory, persistence,
    /// replication, sentinel, cluster, clock, permissions, role, redlock,
    /// connection.
    pub check: &'static str,
    /// What was found, and why it matters.
    pub what: String,
    /// What to change, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// What was measured on one server.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Facts {
    /// host:port or socket path; never a password.
    pub server: String,
    /// The server's `redis_version` (INFO server).
    pub version: Option<String>,
    /// Its replication role: `master` or `slave` (INFO replication).
    pub role: Option<String>,
    /// Its `run_id`, which changes on every restart.
    pub run_id: Option<String>,
    /// Median round trip of TIME, in milliseconds.
    pub rtt_ms: Option<f64>,
    /// The server's TIME minus this host's clock, in milliseconds
    /// (positive: the server is ahead).
    pub offset_ms: Option<f64>,
    /// Memory in use as Redis weighs it against `maxmemory`, in bytes
    /// (`used_memory` less `mem_not_counted_for_evict`).
    pub used_memory: Option<u64>,
    /// Its `maxmemory` in bytes (0: no limit).
    pub maxmemory: Option<u64>,
}

/// Everything `rlock doctor` found.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// No finding is `unsafe`.
    pub safe: bool,
    /// The longest TTL the report assumes (restart delay, clock margin).
    pub ttl_ms: u64,
    /// The role the user was checked against (`--role`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// What was found, in the order checked.
    pub findings: Vec<Finding>,
    /// What was measured on each server.
    pub servers: Vec<Facts>,
}

impl Report {
    pub(super) fn new(ttl: Duration) -> Report {
        Report {
            safe: true,
            ttl_ms: crate::duration::millis(ttl),
            role: None,
            findings: Vec::new(),
            servers: Vec::new(),
        }
    }

    pub(super) fn add(
        &mut self,
        severity: Severity,
        server: &str,
        check: &'static str,
        what: String,
        fix: Option<String>,
    ) {
        self.safe &= severity != Severity::Unsafe;
        self.findings.push(Finding {
            severity,
            server: server.to_string(),
            check,
            what,
            fix,
        });
    }

    /// How many findings have this severity.
    pub fn count(&self, severity: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }

    /// One line per finding (`severity server check: what; fix: ...`), and
    /// a summary line.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for f in &self.findings {
            out.push_str(&format!(
                "{:<6} {} {}: {}",
                f.severity.to_string(),
                f.server,
                f.check,
                f.what
            ));
            if let Some(fix) = &f.fix {
                out.push_str("; fix: ");
                out.push_str(fix);
            }
            out.push('\n');
        }
        let (bad, warn) = (self.count(Severity::Unsafe), self.count(Severity::Warn));
        let warnings = match warn {
            1 => "1 warning".to_string(),
            n => format!("{n} warnings"),
        };
        if bad == 0 {
            out.push_str(&format!(
                "rlock doctor: nothing unsafe found ({warnings})\n"
            ));
        } else {
            out.push_str(&format!(
                "rlock doctor: {bad} unsafe finding{}, {warnings}\n",
                if bad == 1 { "" } else { "s" }
            ));
        }
        out
    }
}
