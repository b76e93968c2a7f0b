//! Execs inside execs: re-entry, other locks, concurrency.

use super::*;

#[test]
fn a_nested_exec_of_another_lock_costs_no_reentry_attempt() {
    // Inside `rlock exec a`, RLOCK_TOKEN is a's token: a nested exec of b
    // must take b with one script call, not first try a's token on b.
    let r = Redis::start();
    let bin = env!("CARGO_BIN_EXE_rlock");
    rlock(&r).args(["exec", "warm", "--", "true"]).run().ok(); // scripts cached
    let _: () = r.cmd(&["CONFIG", "RESETSTAT"]);
    let inner = format!("{bin} exec b -- true");
    rlock(&r)
        .args(["exec", "a", "--", "sh", "-c", &inner])
        .run()
        .ok();
    let info: String = r.cmd(&["INFO", "commandstats"]);
    let calls = |name: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
            .and_then(|rest| rest.split(',').next()?.parse().ok())
            .unwrap_or(0)
    };
    // acquire a, acquire b (each touching the index in the same call on
    // one server), release b, release a
    assert_eq!(calls("evalsha") + calls("eval"), 4, "{info}");
}

#[test]
fn nested_exec_of_the_same_key_reenters() {
    let r = Redis::shared();
    let bin = env!("CARGO_BIN_EXE_rlock");
    // Inner execs would wait forever for their parent without re-entry;
    // -w bounds the damage if that breaks.
    let inner = format!(
        "{bin} exec -w 3s a -- {bin} exec -w 3s b -- {bin} exec -w 3s a -- sh -c 'echo $RLOCK_FENCE'"
    );
    let f = r.fence_ahead("a");
    let run = exec_sh(&r, &[], "a", &inner).run().ok();
    let first = (f + 1).to_string();
    assert_eq!(run.stdout.trim(), first, "the nested exec got a new grant");
    r.assert_nothing_held(&[]);
    // A nested acquire re-enters too and prints the same token.
    let script = format!(
        "t=$({bin} acquire -n a) && [ \"$t\" = \"$RLOCK_TOKEN\" ] && {bin} release a --token \"$t\""
    );
    exec_sh(&r, &[], "a", &script).run().ok();
    r.assert_nothing_held(&[]);
}

#[test]
fn many_concurrent_execs_never_overlap() {
    let r = Redis::start();
    let bin = env!("CARGO_BIN_EXE_rlock");
    let body = "n=$(redis-cli -p $PORT INCR inside); [ \"$n\" = 1 ] || exit 99; sleep 0.01; redis-cli -p $PORT DECR inside >/dev/null";
    let script =
        format!("for i in 1 2 3 4 5; do {bin} exec -w 60s c -- sh -c '{body}' || exit $?; done");
    contenders(8, &script, &r.url(), &r);
    r.assert_nothing_held(&["inside"]);
}

#[test]
fn a_short_nested_ttl_never_shortens_the_outer_lease() {
    let r = Redis::shared();
    let bin = env!("CARGO_BIN_EXE_rlock");
    let script =
        format!("{bin} exec --ttl 1s k1 -- true; {bin} renew k1 --ttl 2s; {bin} status k1 --json");
    let run = exec_sh(&r, &["--ttl", "1m"], "k1", &script).run().ok();
    let st: serde_json::Value = serde_json::from_str(run.stdout.lines().last().unwrap()).unwrap();
    let ttl = st["holders"][0]["ttl_ms"].as_u64().unwrap();
    assert!(ttl > 50_000, "nested holders cut the lease to {ttl} ms");
}

#[test]
fn nested_exec_of_a_semaphore_reenters() {
    let r = Redis::shared();
    let bin = env!("CARGO_BIN_EXE_rlock");
    let inner = format!("{bin} exec -n g -- true");
    exec_sh(&r, &["--limit", "3"], "g", &inner).run().ok();
    r.assert_nothing_held(&[]);
}

#[test]
fn a_crashed_nested_exec_leaves_nothing_held() {
    // Item 4: the inner exec's re-entry was never undone, so the lock stayed
    // held for a TTL after the outer exec had ended.
    let r = Redis::shared();
    let bin = env!("CARGO_BIN_EXE_rlock");
    // The inner command kills the inner rlock (its parent is the guard;
    // the guard's parent is rlock).
    let inner = format!("{bin} exec nest -- sh -c 'kill -9 $(cut -d\" \" -f4 /proc/$PPID/stat)'");
    rlock(&r)
        .args(["exec", "nest", "--ttl", "20s", "--", "sh", "-c", &inner])
        .run()
        .code(137);
    assert!(!r.held("nest"), "the lock outlived the outermost exec");
}
