//! contrib/prometheus/alerts.yml: valid rules (`promtool check rules`)
//! that fire on the series of alerts.test.yml (`promtool test rules`).
//! promtool comes from scripts/ensure-promtool.sh; a missing one fails.

use std::path::PathBuf;

use crate::exporter::promtool;

fn contrib() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("contrib/prometheus")
}

#[test]
fn the_alert_rules_pass_promtool_and_their_unit_tests() {
    for args in [
        &["check", "rules", "alerts.yml"][..],
        &["test", "rules", "alerts.test.yml"],
    ] {
        let out = promtool()
            .args(args)
            .current_dir(contrib())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_rules_use_only_the_agreed_metric_names() {
    // The names agreed for issue 31, and Prometheus' and node_exporter's own.
    let known = [
        "rlock_lock_held_seconds",
        "rlock_lock_waiters",
        "rlock_lock_oldest_wait_seconds",
        "rlock_lock_losses_total",
        "rlock_lock_expired_total",
        "rlock_lock_breaks_total",
        "rlock_lock_overruns_total",
        "rlock_up",
        "up",
        "node_textfile_mtime_seconds",
    ];
    let rules = std::fs::read_to_string(contrib().join("alerts.yml")).unwrap();
    let exprs: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("expr: "))
        .collect();
    assert_eq!(exprs.len(), 10, "{exprs:?}");
    for e in exprs {
        let names: Vec<&str> = e
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("rlock_") || *w == "up" || w.starts_with("node_"))
            .collect();
        assert!(!names.is_empty(), "{e}");
        for n in names {
            assert!(known.contains(&n), "{n} in {e}");
        }
    }
}
