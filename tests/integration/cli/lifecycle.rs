//! Acquire, release, renew, fences and check: what each prints and does
//! for the owner and for anyone else.

use std::time::Duration;

use crate::util::*;

#[test]
fn acquire_prints_only_a_token_and_release_frees() {
    let r = Redis::shared();
    let run = rlock(&r).args(["acquire", "job"]).run().ok();
    assert_eq!(run.stderr, "");
    let tok = run.token();
    let st = r.status_json("job");
    assert_eq!(st["held"], true);
    assert!(st["holders"][0]["pid"].as_u64().is_some());
    assert!(st["holders"][0]["ttl_ms"].as_u64().unwrap() > 25_000);
    assert!(
        !serde_json::to_string(&st).unwrap().contains(&tok),
        "status leaks the token"
    );
    rlock(&r)
        .args(["release", "job", "--token", &tok])
        .run()
        .ok();
    assert_eq!(r.status_json("job")["held"], false);
    r.assert_nothing_held(&[]);
}

#[test]
fn releasing_twice_is_harmless_and_says_so() {
    let r = Redis::shared();
    let tok = rlock(&r).args(["acquire", "k"]).run().ok().token();
    rlock(&r)
        .args(["release", "k"])
        .env("RLOCK_TOKEN", &tok)
        .run()
        .ok();
    let again = rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
    assert!(again.stderr.contains("not held"), "{}", again.stderr);
    r.assert_nothing_held(&[]);
    // Also while other slots of a semaphore are held (it said "another
    // owner", 77, before).
    let a = rlock(&r)
        .args(["acquire", "--limit", "2", "s"])
        .run()
        .ok()
        .token();
    let b = rlock(&r)
        .args(["acquire", "--limit", "2", "s"])
        .run()
        .ok()
        .token();
    rlock(&r).args(["release", "s", "--token", &a]).run().ok();
    let again = rlock(&r).args(["release", "s", "--token", &a]).run().ok();
    assert!(again.stderr.contains("not held"), "{}", again.stderr);
    rlock(&r).args(["release", "s", "--token", &b]).run().ok();
    r.assert_nothing_held(&[]);
}

#[test]
fn renew_extends_only_for_the_owner() {
    let r = Redis::shared();
    let tok = rlock(&r)
        .args(["acquire", "k", "--ttl", "5s"])
        .run()
        .ok()
        .token();
    rlock(&r)
        .args(["renew", "k", "--token", &tok, "--ttl", "1h"])
        .run()
        .ok();
    let ttl = r.status_json("k")["holders"][0]["ttl_ms"].as_u64().unwrap();
    assert!(ttl > 3_000_000, "ttl {ttl}");
    let foreign = uuid::Uuid::new_v4().to_string();
    rlock(&r)
        .args(["renew", "k", "--token", &foreign])
        .run()
        .fails(77, "does not own");
    rlock(&r)
        .args(["release", "k", "--token", &foreign])
        .run()
        .fails(77, "does not own");
    rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
    rlock(&r)
        .args(["renew", "k", "--token", &tok])
        .run()
        .fails(79, "lost");
    r.assert_nothing_held(&[]);
}

#[test]
fn renew_never_revives_an_expired_lease() {
    let r = Redis::shared();
    let tok = rlock(&r)
        .args(["acquire", "k", "--ttl", "100ms"])
        .run()
        .ok()
        .token();
    eventually(Duration::from_secs(5), "the lease to expire", || {
        !r.held("k")
    });
    rlock(&r)
        .args(["renew", "k", "--token", &tok])
        .run()
        .fails(79, "lost");
    assert_eq!(r.status_json("k")["held"], false);
}

#[test]
fn fencing_counter_increases_with_every_grant() {
    let r = Redis::shared();
    let mut last = 0;
    for _ in 0..4 {
        let tok = rlock(&r).args(["acquire", "f"]).run().ok().token();
        let fence = r.status_json("f")["holders"][0]["fence"].as_u64().unwrap();
        assert!(fence > last, "fence {fence} after {last}");
        last = fence;
        rlock(&r).args(["release", "f", "--token", &tok]).run().ok();
    }
    assert_eq!(r.status_json("f")["fence"], last);
}

#[test]
fn check_says_held_gone_or_taken_inside_and_outside_exec() {
    let r = Redis::start();
    let tok = rlock(&r).args(["acquire", "k"]).run().ok().token();
    let run = rlock(&r)
        .args(["-v", "check", "k", "--token", &tok])
        .run()
        .ok();
    assert!(run.stderr.contains("held by this token"), "{}", run.stderr);
    let json = rlock(&r)
        .args(["check", "k", "--json"])
        .env("RLOCK_TOKEN", &tok)
        .run()
        .ok();
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        (v["held"].as_bool(), v["fence"].clone()),
        (
            Some(true),
            r.status_json("k")["holders"][0]["fence"].clone()
        )
    );
    assert!(v["ttl_ms"].as_u64().unwrap() > 20_000, "{v}");
    // Another owner's token.
    let other = uuid::Uuid::new_v4().to_string();
    rlock(&r)
        .args(["check", "k", "--token", &other])
        .run()
        .fails(77, "does not own");
    // Released: gone.
    rlock(&r).args(["release", "k", "--token", &tok]).run().ok();
    rlock(&r)
        .args(["check", "k", "--token", &tok])
        .run()
        .fails(79, "holds it no more");
    // Inside exec, the key is enough; after a DEL the check says gone.
    let script =
        "$BIN check k && redis-cli -p $PORT DEL 'rlock:{k}:h' >/dev/null; $BIN check k; echo $?";
    let run = rlock(&r)
        .args(["exec", "k", "--on-lost", "ignore", "--", "sh", "-c", script])
        .env("BIN", env!("CARGO_BIN_EXE_rlock"))
        .env("PORT", &r.port.to_string())
        .run();
    assert_eq!(run.stdout.trim(), "79", "{}", run.stderr);
    // Bad input: no token, a malformed one.
    rlock(&r).args(["check", "k"]).run().code(64);
    rlock(&r)
        .args(["check", "k", "--token", "nope"])
        .run()
        .fails(64, "malformed token");
}

/// Inside `rlock exec deploy -- rlock exec db -- ...`, RLOCK_TOKEN is db's
/// token and deploy's is in RLOCK_HELD: `check`, `renew` and `release` of
/// deploy without --token act with deploy's, as a re-entering exec does
/// (they used RLOCK_TOKEN, and said "another owner", 77). An explicit
/// --token still wins, and a token the script exported is still found
/// past an exec of another lock.
#[test]
fn check_renew_and_release_use_the_token_rlock_held_records_for_the_lock() {
    let r = Redis::shared();
    let script = "$BIN check deploy; echo check=$?; \
         $BIN renew deploy --ttl 40s; echo renew=$?; \
         $BIN acquire -n deploy >/dev/null && $BIN -q release deploy; echo release=$?; \
         $BIN check deploy --token \"$RLOCK_TOKEN\" 2>/dev/null; echo explicit=$?; \
         $BIN check db; echo db=$?";
    let bin = env!("CARGO_BIN_EXE_rlock");
    let run = rlock(&r)
        .args([
            "exec", "deploy", "--", bin, "exec", "db", "--", "sh", "-c", script,
        ])
        .env("BIN", bin)
        .run()
        .ok();
    assert_eq!(
        run.stdout, "check=0\nrenew=0\nrelease=0\nexplicit=77\ndb=0\n",
        "stderr: {}",
        run.stderr
    );
    r.assert_nothing_held(&[]);
    // A token the script exported, passed down past an exec of another
    // lock (whose own token is then RLOCK_TOKEN).
    let tok = rlock(&r).args(["acquire", "a"]).run().ok().token();
    let run = rlock(&r)
        .args(["exec", "b", "--", "sh", "-c", "$BIN check a; echo a=$?"])
        .env("BIN", bin)
        .env("RLOCK_TOKEN", &tok)
        .run()
        .ok();
    assert_eq!(run.stdout, "a=0\n", "stderr: {}", run.stderr);
    rlock(&r).args(["release", "a", "--token", &tok]).run().ok();
    r.assert_nothing_held(&[]);
}
