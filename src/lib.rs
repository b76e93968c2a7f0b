//! rlock: Redis-backed distributed locks for shell scripts, cron jobs and
//! CI pipelines. The `rlock` binary is a thin front end over this library.
//!
//! ```no_run
//! use std::time::Duration;
//! use rlock::{ConnectOptions, Locker, Request};
//!
//! let mut locker = Locker::connect(&ConnectOptions::default(), "rlock:")?;
//! let lease = locker.acquire("market", &Request::new(Duration::from_secs(30)), None, &mut |_| {})?;
//! // ... critical section; lease.fence orders writes downstream ...
//! locker.release("market", &lease.token)?;
//! # Ok::<(), rlock::Error>(())
//! ```

pub mod clock;
pub mod conn;
pub mod doctor;
pub mod duration;
pub mod error;
pub mod exec;
pub mod exit_code;
pub mod keep;
pub mod lock;
mod locker;
mod quorum;
pub mod signals;

pub use conn::ConnectOptions;
pub use error::{Error, Result};
pub use lock::{
    Busy, Cancel, Held, HolderInfo, HolderStatus, Lease, Mode, Released, Request, Status, Token,
    Wait,
};
pub use locker::Locker;
