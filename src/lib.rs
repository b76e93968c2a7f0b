//! rlock: Redis-backed distributed locks for shell scripts, cron jobs and
//! CI pipelines. The `rlock` binary is a thin front end over this library.
//!
//! ```no_run
//! use std::time::Duration;
//! use rlock::{ConnectOptions, Locker, Request};
//!
//! let mut locker = Locker::connect(&ConnectOptions::default(), "rlock:")?;
//! let lease = locker.acquire("market", &Request::new(Duration::from_secs(30))?, None, &mut |_| {})?;
//! // ... critical section; lease.fence orders writes downstream ...
//! locker.release("market", &lease.token)?;
//! # Ok::<(), rlock::Error>(())
//! ```
//!
//! Bad input is refused before anything is sent to Redis, with an
//! [`Error::Invalid`]; [`exit_code::for_error`] gives every error the exit
//! code the CLI documents:
//!
//! ```
//! use std::time::Duration;
//! use rlock::{exit_code, ConnectOptions, Error, Locker, Request};
//!
//! // Too short a lease to renew: refused before connecting.
//! let err = Request::new(Duration::from_millis(10)).unwrap_err();
//! assert!(matches!(err, Error::Invalid(_)));
//! assert_eq!(exit_code::for_error(&err, exit_code::BUSY), exit_code::USAGE);
//!
//! // Not a Redis URL: refused before connecting, too.
//! let opts = ConnectOptions { urls: vec!["http://127.0.0.1:6379".into()], ..Default::default() };
//! let err = Locker::connect(&opts, "rlock:").err().unwrap();
//! assert_eq!(exit_code::for_error(&err, exit_code::BUSY), 64);
//! ```

pub mod clock;
pub mod conn;
pub mod doctor;
pub mod duration;
pub mod error;
pub mod exec;
pub mod exit_code;
mod fd;
mod hold;
pub mod keep;
pub mod lock;
mod locker;
mod proctitle;
mod redact;
pub mod signals;

pub use conn::ConnectOptions;
pub use error::{Error, Result};
pub use lock::{
    Backend, Break, Busy, Cancel, Event, Held, HistoryLimits, HolderInfo, HolderStatus, Lease,
    Loss, Mode, Release, ReleaseNote, Released, Renewal, Request, RequestBuilder, Status, Token,
    Wait, WaiterStatus, Watch,
};
pub use locker::Locker;
