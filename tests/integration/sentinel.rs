//! Sentinel: a master, a replica and three Sentinels started by the
//! harness, with a forced failover.

use crate::util::*;

fn rs(s: &Sentinels) -> Rlock {
    bare_rlock()
        .env("RLOCK_URL", &s.urls())
        .env("RLOCK_SENTINEL", "mymaster")
}

#[test]
fn locks_follow_the_master_through_a_failover() {
    let s = Sentinels::start();
    assert_eq!(s.master_port(), s.master.port);
    // Confirmed on the replica before acquire returns, so the failover
    // cannot lose it.
    let tok = rs(&s)
        .args(["--min-replicas", "1", "acquire", "k"])
        .run()
        .ok()
        .token();
    rs(&s).args(["exec", "other", "--", "true"]).run().ok();
    s.failover();
    let st = rs(&s).args(["status", "k", "--json"]).run().ok();
    assert!(
        st.stdout.contains("\"held\":true"),
        "the grant was lost in the failover: {}",
        st.stdout
    );
    rs(&s).args(["acquire", "-n", "k"]).run().fails(75, "busy");
    rs(&s).args(["release", "k", "--token", &tok]).run().ok();
    rs(&s).args(["exec", "k", "--", "true"]).run().ok();
}

#[test]
fn too_few_replicas_fail_and_release_the_grant() {
    let s = Sentinels::start();
    rs(&s)
        .args([
            "--min-replicas",
            "2",
            "--connect-timeout",
            "500ms",
            "acquire",
            "k",
        ])
        .run()
        .fails(69, "replicas");
    s.master.assert_nothing_held(&[]);
    rs(&s)
        .args(["--sentinel", "nosuchmaster", "status", "k"])
        .run()
        .code(69);
}

#[test]
fn a_frozen_sentinel_is_passed_over_within_the_timeout() {
    let s = Sentinels::start();
    s.freeze_first();
    let run = rs(&s)
        .args(["--connect-timeout", "300ms", "acquire", "-n", "k"])
        .run();
    s.thaw_first();
    let run = run.ok();
    run.token();
    assert!(
        run.elapsed < std::time::Duration::from_secs(3),
        "{:?}",
        run.elapsed
    );
}

#[test]
fn min_replicas_confirms_renewals_too() {
    // Renewals count only once a replica has them: with the replica
    // stopped, the lease cannot be confirmed, and exec stops its command
    // as for a lost lock instead of trusting a renewal a failover could
    // roll back.
    let master = Redis::start();
    let replica = replica_of(&master);
    let exec = |cmd: &str| {
        bare_rlock()
            .args([
                "--url",
                &master.url(),
                "--min-replicas",
                "1",
                "--connect-timeout",
                "300ms",
            ])
            .args(["exec", "--ttl", "900ms", "k", "--", "sh", "-c", cmd])
    };
    exec("sleep 2").run().ok();
    let child = exec("sleep 0.2; kill -STOP $REPLICA; sleep 5")
        .env("REPLICA", &replica.child_pid().to_string())
        .spawn();
    let run = finish(child, "exec");
    kill(replica.child_pid(), libc::SIGCONT);
    run.fails_with_lines(79, "no renewal confirmed");
}
