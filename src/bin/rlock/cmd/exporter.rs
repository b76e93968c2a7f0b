//! `metrics --listen ADDR` (the exposition served over HTTP) and
//! `metrics --textfile PATH` (written for node_exporter's textfile
//! collector): both carry what [`super::metrics::render`] makes.
//!
//! The server is a loop in the main thread on std::net and poll(2), with
//! no async runtime and no HTTP crate: it answers one path, one request per
//! connection (see crate::http), and a runtime would be the biggest part
//! of the binary for a request a minute. It serves one connection at a
//! time, on purpose: each scrape is one read of every lock in use over one
//! Redis connection, Prometheus scrapes a target one request after the
//! other, and a second scraper (an HA pair) waits in the listen backlog
//! for the milliseconds a scrape takes, so Redis never sees more than one
//! exporter read at once and the connection needs no lock. A client that
//! stalls holds the others up for at most [`HEAD_TIMEOUT`], then
//! [`WRITE_TIMEOUT`] per write and [`LINGER`]; the port is meant for a
//! trusted network.
//!
//! A scrape whose Redis read fails still answers 200, with `rlock_up 0`
//! (as redis_exporter does), and drops the connection: the next scrape
//! connects again, so the exporter outlives a Redis restart or outage.
//! SIGINT and SIGTERM are taken from a signalfd polled beside the
//! listening socket, and end the loop between requests (exit 0).

use std::fs::OpenOptions;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rlock::exit_code;
use rlock::signals::Blocked;
use rlock::{Error, Locker};

use super::metrics::render;
use crate::cli::{Global, Metrics};
use crate::http::{self, Route, Status};
use crate::setup::connect_listing;

/// How long a client has to send its whole request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one write of the response may block on a client not reading.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an answered client may take to close its side.
const LINGER: Duration = Duration::from_secs(1);

/// `metrics --listen ADDR`: serve until SIGINT or SIGTERM.
pub(crate) fn listen(g: &Global, m: &Metrics, addr: &str) -> anyhow::Result<u8> {
    let addrs: Vec<_> = addr
        .to_socket_addrs()
        .map_err(|e| Error::invalid(format!("--listen {addr:?}: {e}; use IP:PORT or HOST:PORT")))?
        .collect();
    let listener = TcpListener::bind(&addrs[..])
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    listener.set_nonblocking(true)?;
    // Blocked before any connection is made: no thread misses the mask.
    let signals = Blocked::new(&[libc::SIGINT, libc::SIGTERM])?;
    let mut scraper = Scraper {
        g,
        locker: None,
        up: None,
    };
    // Bad options end it now; a Redis that does not answer (or answers
    // nonsense) is rlock_up 0 until it does.
    if let Err(e) = scraper.connect() {
        match e.chain().find_map(|e| e.downcast_ref::<Error>()) {
            Some(Error::Invalid(_) | Error::Conflict(_)) | None => return Err(e),
            Some(_) => scraper.note(Err(&e)),
        }
    }
    if !g.quiet {
        say!(
            "rlock: serving metrics at http://{}{}",
            listener.local_addr()?,
            http::METRICS_PATH
        );
    }
    loop {
        let mut fds = [pollin(signals.fd()), pollin(listener.as_raw_fd())];
        // SAFETY: a valid array of 2 pollfds.
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } <= 0 {
            continue; // EINTR
        }
        if fds[0].revents != 0 && signals.take().is_some() {
            return Ok(exit_code::OK);
        }
        if fds[1].revents != 0 {
            match listener.accept() {
                Ok((conn, _)) => answer(conn, &mut scraper, m),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(e) => {
                    // Out of descriptors, say: poll would report the
                    // socket readable again at once.
                    say!("rlock: cannot accept a connection: {e}");
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }
}

fn pollin(fd: libc::c_int) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// Read one request on `conn` and answer it; errors on the connection are
/// the client's, and end only this connection.
fn answer(mut conn: TcpStream, scraper: &mut Scraper, m: &Metrics) {
    let reply = match read_head(&mut conn) {
        Ok(head) => match http::route(&head) {
            Route::Metrics => http::response(Status::Ok, http::TEXT_FORMAT, &scraper.scrape(m)),
            Route::Refuse(status) => http::refusal(status),
        },
        Err(Some(status)) => http::refusal(status),
        // Timed out, closed or reset: nobody to answer.
        Err(None) => return,
    };
    let _ = conn.set_write_timeout(Some(WRITE_TIMEOUT));
    let _ = conn.write_all(&reply);
    let _ = conn.shutdown(std::net::Shutdown::Write);
    // A close with input unread sends a reset, which can reach the client
    // before it read the answer (a refused head past the cap, a body):
    // read what it still sends until it closes, within a bound.
    let deadline = Instant::now() + LINGER;
    let mut sink = [0u8; 4096];
    let mut drained = 0;
    while drained < http::MAX_HEAD * 8 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || conn.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match conn.read(&mut sink) {
            Ok(0) => break,
            Ok(n) => drained += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
}

/// The request head, read within [`HEAD_TIMEOUT`] and [`http::MAX_HEAD`]
/// bytes; `Err(Some(431))` past the size, `Err(None)` when the client
/// sent no whole head in time.
fn read_head(conn: &mut TcpStream) -> Result<Vec<u8>, Option<Status>> {
    // Accepted sockets do not inherit the listener's O_NONBLOCK on Linux;
    // set anyway, the timeouts below need a blocking socket.
    conn.set_nonblocking(false).map_err(|_| None)?;
    let deadline = Instant::now() + HEAD_TIMEOUT;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(None);
        }
        conn.set_read_timeout(Some(left)).map_err(|_| None)?;
        let n = match conn.read(&mut chunk) {
            Ok(0) => return Err(None),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return Err(None),
        };
        buf.extend_from_slice(&chunk[..n]);
        match http::head_len(&buf) {
            Some(len) if len <= http::MAX_HEAD => {
                buf.truncate(len);
                return Ok(buf);
            }
            Some(_) => return Err(Some(Status::HeadTooLarge)),
            None if buf.len() > http::MAX_HEAD => return Err(Some(Status::HeadTooLarge)),
            None => {}
        }
    }
}

/// The Redis side of the server: a connection made on demand and dropped
/// after a failed read, and whether Redis answered last time (to log
/// changes only, not every failed scrape).
struct Scraper<'g> {
    g: &'g Global,
    locker: Option<Locker>,
    up: Option<bool>,
}

impl Scraper<'_> {
    fn connect(&mut self) -> anyhow::Result<&mut Locker> {
        match &mut self.locker {
            Some(l) => Ok(l),
            slot @ None => Ok(slot.insert(connect_listing(self.g)?)),
        }
    }

    /// The exposition of the locks, then rlock_up and
    /// rlock_scrape_duration_seconds; only those two when Redis did not
    /// answer.
    fn scrape(&mut self, m: &Metrics) -> String {
        let started = Instant::now();
        let read = self
            .connect()
            .and_then(|l| render(l, m).map_err(anyhow::Error::from));
        let took = started.elapsed();
        if read.is_err() {
            self.locker = None;
        }
        self.note(read.as_ref().map(|_| ()));
        let up = u8::from(read.is_ok());
        let mut text = read.unwrap_or_default();
        text.push_str(&format!(
            "# HELP rlock_up Whether Redis answered this scrape (1) or not (0).\n\
             # TYPE rlock_up gauge\n\
             rlock_up {up}\n\
             # HELP rlock_scrape_duration_seconds How long this scrape took to read Redis.\n\
             # TYPE rlock_scrape_duration_seconds gauge\n\
             rlock_scrape_duration_seconds {:.6}\n",
            took.as_secs_f64()
        ));
        text
    }

    /// Log on stderr when Redis stops answering, and when it answers
    /// again (not with --quiet).
    fn note(&mut self, read: Result<(), &anyhow::Error>) {
        match read {
            Err(e) if self.up != Some(false) => {
                say!("rlock: Redis does not answer, rlock_up 0: {}", one_line(e));
            }
            Ok(()) if self.up == Some(false) && !self.g.quiet => {
                say!("rlock: Redis answers again, rlock_up 1");
            }
            _ => {}
        }
        self.up = Some(read.is_ok());
    }
}

/// An error and its causes on one line.
fn one_line(e: &anyhow::Error) -> String {
    let text = format!("{e:#}");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `--textfile PATH` checked before connecting: it names a file in a
/// directory that exists. Its temporary file, beside it:
/// `.NAME.PID.tmp`, hidden and not ending in `.prom`, so that the textfile
/// collector never reads it.
pub(crate) fn textfile_temp(path: &Path) -> anyhow::Result<PathBuf> {
    let bad = |why: &str| Error::invalid(format!("--textfile {}: {why}", path.display()));
    let name = path
        .file_name()
        .filter(|_| !path.as_os_str().to_string_lossy().ends_with('/'))
        .ok_or_else(|| bad("names no file"))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(bad("its directory does not exist").into());
    }
    if path.is_dir() {
        return Err(bad("is a directory").into());
    }
    Ok(dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    )))
}

/// Write `text` to `temp`, then rename it over `path`: a reader sees the
/// old file or the new one, never a part. On failure the temporary file is
/// removed and `path` is as it was.
pub(crate) fn write_textfile(path: &Path, temp: &Path, text: &str) -> anyhow::Result<()> {
    let mut created = false;
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(temp)?;
        created = true;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(temp, path)
    })();
    result.map_err(|e| {
        if created {
            let _ = std::fs::remove_file(temp);
        }
        anyhow::anyhow!("cannot write {}: {e}", path.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        rlock_test_support::scratch_dir(&format!("textfile-{name}"))
    }

    #[test]
    fn the_temporary_file_is_hidden_beside_the_target() {
        let d = dir("temp");
        let t = textfile_temp(&d.join("rlock.prom")).unwrap();
        assert_eq!(t.parent(), Some(d.as_path()));
        let name = t.file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with(".rlock.prom.") && name.ends_with(".tmp"),
            "{name}"
        );
        for bad in [d.join("nowhere/rlock.prom"), d.clone(), PathBuf::from("/")] {
            let e = textfile_temp(&bad).unwrap_err();
            assert!(
                matches!(e.downcast_ref::<Error>(), Some(Error::Invalid(_))),
                "{bad:?}: {e}"
            );
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_write_replaces_the_file_and_a_failed_one_leaves_no_temp() {
        let d = dir("write");
        let path = d.join("rlock.prom");
        let temp = textfile_temp(&path).unwrap();
        write_textfile(&path, &temp, "a 1\n").unwrap();
        write_textfile(&path, &temp, "a 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a 2\n");
        // The rename fails (a directory with something in it is in the
        // way): the temporary file goes, the old content stays.
        let blocked = d.join("blocked.prom");
        std::fs::create_dir_all(blocked.join("x")).unwrap();
        let temp2 = textfile_temp(&d.join("x.prom")).unwrap();
        assert!(write_textfile(&blocked, &temp2, "a 3\n").is_err());
        let mut left: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["blocked.prom", "rlock.prom"]);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a 2\n");
        let _ = std::fs::remove_dir_all(&d);
    }
}
