//! Using rlock from Rust: take a lock (waiting up to 10 s for it), do the
//! work in steps while renewing the lease, stop if the lease was lost, and
//! give the lock back.
//!
//! Needs a running Redis: `cargo run --example lease -- redis://127.0.0.1:6379`
//! (or set RLOCK_URL; that URL is the default).

use std::time::Duration;

use rlock::{ConnectOptions, Error, Locker, Released, Request, Wait};

fn main() {
    if let Err(e) = run() {
        eprintln!("lease: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Error> {
    let url = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("RLOCK_URL").ok())
        .unwrap_or_else(|| "redis://127.0.0.1:6379".into());
    let opts = ConnectOptions {
        urls: vec![url],
        ..ConnectOptions::default()
    };
    let mut locker = Locker::connect(&opts, "rlock:")?;

    let ttl = Duration::from_secs(6);
    let req = Request::builder(ttl)
        .wait(Wait::For(Duration::from_secs(10)))
        .build()?;
    let lease = locker.acquire("report", &req, None, &mut |busy| {
        eprintln!(
            "lease: lock busy, place {} in the queue; waiting",
            busy.position
        );
    })?;
    println!("holding \"report\", fencing token {}", lease.fence);

    for step in 1..=3 {
        // A step of work; pass lease.fence along with any write it makes,
        // so that storage can refuse writes from an older holder.
        std::thread::sleep(Duration::from_secs(1));
        println!("step {step} done");
        // Renew well within the TTL. Lost: the lease ran out (or was
        // deleted); NotOwner: someone else holds the lock already. Either
        // way the work is no longer protected: stop at once.
        match locker.renew("report", &lease.token, ttl) {
            Ok(_valid_until) => {}
            Err(e @ (Error::Lost { .. } | Error::NotOwner { .. })) => {
                eprintln!("lease: stopping after step {step}: the work is not protected");
                return Err(e);
            }
            Err(e) => return Err(e),
        }
    }

    match locker.release("report", &lease.token)? {
        Released::Released => println!("released"),
        other => println!("released, though Redis says {other:?}"),
    }
    Ok(())
}
