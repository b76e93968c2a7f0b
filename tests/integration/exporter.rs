//! `rlock metrics --listen` and `--textfile`, against real redis-servers:
//! scraped over HTTP with std's TcpStream, the body read by a real parser
//! (the official Python client's, as in metrics.rs) and checked by
//! `promtool check metrics`; Redis killed and started again under a
//! running exporter; the textfile left alone while Redis does not answer.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::time::Duration;

use crate::util::*;
use crate::wait_outage::Again;

/// promtool, which scripts/ensure-promtool.sh installs (scripts/test.sh
/// runs it): a missing one fails the test.
pub(crate) fn promtool() -> Command {
    let ok = Command::new("promtool")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "promtool is missing: run scripts/ensure-promtool.sh (Debian's prometheus package)"
    );
    Command::new("promtool")
}

/// `promtool check metrics` accepts `text` (format and naming lints).
#[track_caller]
fn promtool_accepts(text: &str) {
    let out = fed(promtool().args(["check", "metrics"]), text);
    assert!(
        out.status.success(),
        "promtool check metrics refused:\n{text}\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `text` read by prometheus_client's parser: each sample's value by its
/// name and labels as `name{k="v"}` (`name` when it has none).
fn samples(text: &str) -> BTreeMap<String, f64> {
    let script = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = {}
for f in text_string_to_metric_families(sys.stdin.read()):
    for s in f.samples:
        labels = ",".join('%s="%s"' % kv for kv in sorted(s.labels.items()))
        out[s.name + ("{%s}" % labels if labels else "")] = s.value
print(json.dumps(out))
"#;
    let out = fed(
        Command::new("python3")
            .args(["-c", script])
            .env("PYTHONPATH", crate::metrics::parser_dir()),
        text,
    );
    assert!(
        out.status.success(),
        "the parser refused:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A running `rlock metrics --listen 127.0.0.1:0` (the kernel picks the
/// port: no race for a free one); stopped with SIGTERM when dropped.
pub(crate) struct Exporter {
    child: Child,
    addr: String,
    stderr: BufReader<ChildStderr>,
}

impl Exporter {
    pub(crate) fn start(r: &Redis, url: &str) -> Exporter {
        let mut child = rlock(r)
            .env("RLOCK_URL", url)
            .args(["metrics", "--listen", "127.0.0.1:0"])
            .spawn();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        // "rlock: serving metrics at http://ADDR/metrics", after any line
        // about Redis not answering.
        let mut addr = None;
        for _ in 0..2 {
            let mut line = String::new();
            stderr.read_line(&mut line).unwrap();
            if let Some(rest) = line
                .trim()
                .strip_prefix("rlock: serving metrics at http://")
            {
                addr = rest.strip_suffix("/metrics").map(str::to_string);
                break;
            }
        }
        let addr = addr.unwrap_or_else(|| panic!("the exporter did not start"));
        Exporter {
            child,
            addr,
            stderr,
        }
    }

    /// Send `request` as is; the status line, headers and body of the
    /// answer.
    fn send(&self, request: &[u8]) -> (String, String, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        s.write_all(request).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        let (head, body) = out
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("no head in {out:?}"));
        let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
        (status.to_string(), headers.to_string(), body.to_string())
    }

    /// GET /metrics: the body of a 200 with the text format's type, which
    /// promtool accepts.
    #[track_caller]
    pub(crate) fn scrape(&self) -> String {
        let (status, headers, body) = self.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(status, "HTTP/1.1 200 OK", "{headers}\n{body}");
        assert!(
            headers
                .lines()
                .any(|h| h == "Content-Type: text/plain; version=0.0.4; charset=utf-8"),
            "{headers}"
        );
        assert!(
            headers
                .lines()
                .any(|h| h == format!("Content-Length: {}", body.len())),
            "{headers}"
        );
        promtool_accepts(&body);
        body
    }

    /// Stop it with `sig`: its exit code and the rest of its stderr.
    fn stop(mut self, sig: i32) -> (i32, String) {
        kill(self.child.id(), sig);
        let code = self.child.wait().unwrap().code().unwrap_or(-1);
        let mut rest = String::new();
        self.stderr.read_to_string(&mut rest).unwrap();
        (code, rest)
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_exporter_serves_each_scrape_from_redis_and_outlives_an_outage() {
    let r = Redis::start();
    rlock(&r)
        .args(["acquire", "job", "--ttl", "60s"])
        .run()
        .ok();
    let e = Exporter::start(&r, &r.url());
    let s = samples(&e.scrape());
    assert_eq!(s["rlock_up"], 1.0, "{s:?}");
    assert_eq!(s[r#"rlock_lock_holders{lock="job"}"#], 1.0, "{s:?}");
    let took = s["rlock_scrape_duration_seconds"];
    assert!((0.0..60.0).contains(&took), "{took}");
    // Read at each scrape: a lock taken since shows up.
    rlock(&r)
        .args(["acquire", "later", "--ttl", "60s"])
        .run()
        .ok();
    let s = samples(&e.scrape());
    assert_eq!(s[r#"rlock_lock_holders{lock="later"}"#], 1.0, "{s:?}");

    // Redis dies: still 200, rlock_up 0 and no lock samples.
    kill(r.child_pid(), libc::SIGKILL);
    eventually(Duration::from_secs(10), "redis-server gone", || {
        TcpStream::connect(("127.0.0.1", r.port)).is_err()
    });
    for _ in 0..2 {
        let s = samples(&e.scrape());
        assert_eq!(s["rlock_up"], 0.0, "{s:?}");
        assert!(s.keys().all(|k| !k.starts_with("rlock_lock_")), "{s:?}");
        assert!(s.contains_key("rlock_scrape_duration_seconds"), "{s:?}");
    }

    // Redis back (empty): rlock_up 1 again, and its locks.
    let again = Again::start(r.port);
    let s = samples(&e.scrape());
    assert_eq!(s["rlock_up"], 1.0, "{s:?}");
    assert!(s.keys().all(|k| !k.starts_with("rlock_lock_")), "{s:?}");
    rlock(&r)
        .args(["acquire", "back", "--ttl", "60s"])
        .run()
        .ok();
    let s = samples(&e.scrape());
    assert_eq!(s[r#"rlock_lock_holders{lock="back"}"#], 1.0, "{s:?}");

    // SIGTERM ends it cleanly; the outage was logged once, and its end.
    let (code, stderr) = e.stop(libc::SIGTERM);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stderr
            .matches("rlock: Redis does not answer, rlock_up 0: ")
            .count(),
        1,
        "{stderr}"
    );
    assert_eq!(
        stderr
            .matches("rlock: Redis answers again, rlock_up 1")
            .count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    drop(again);
}

#[test]
fn an_exporter_started_while_redis_is_down_says_rlock_up_0_and_sigint_ends_it() {
    let r = Redis::shared();
    let url = format!("redis://127.0.0.1:{}", free_port());
    let e = Exporter::start(&r, &url);
    let s = samples(&e.scrape());
    assert_eq!(s["rlock_up"], 0.0, "{s:?}");
    let (code, stderr) = e.stop(libc::SIGINT);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn other_paths_methods_and_malformed_requests_are_refused() {
    let r = Redis::shared();
    let e = Exporter::start(&r, &r.url());
    for (request, want) in [
        (&b"GET / HTTP/1.1\r\n\r\n"[..], "HTTP/1.1 404 Not Found"),
        (b"GET /metricsx HTTP/1.1\r\n\r\n", "HTTP/1.1 404 Not Found"),
        (
            b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
            "HTTP/1.1 405 Method Not Allowed",
        ),
        (b"hello\r\n\r\n", "HTTP/1.1 400 Bad Request"),
    ] {
        let (status, headers, _) = e.send(request);
        assert_eq!(status, want, "{request:?}");
        assert_eq!(
            headers.contains("Allow: GET"),
            want.contains("405"),
            "{headers}"
        );
    }
    // A head past the size cap is refused without waiting for its end.
    let mut big = b"GET /metrics HTTP/1.1\r\n".to_vec();
    big.extend(std::iter::repeat_n(b'a', 20_000));
    let (status, ..) = e.send(&big);
    assert_eq!(status, "HTTP/1.1 431 Request Header Fields Too Large");
    // A client that connects and says nothing is dropped after the read
    // timeout; the next scrape is served.
    let silent = TcpStream::connect(&e.addr).unwrap();
    let s = samples(&e.scrape());
    assert_eq!(s["rlock_up"], 1.0, "{s:?}");
    drop(silent);
    let (code, stderr) = e.stop(libc::SIGTERM);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn bad_listen_addresses_are_refused() {
    let r = Redis::shared();
    rlock(&r)
        .args(["metrics", "--listen", "nonsense"])
        .run()
        .fails(64, "--listen \"nonsense\"");
    // Redis' own port is taken.
    let taken = format!("127.0.0.1:{}", r.port);
    rlock(&r)
        .args(["metrics", "--listen", &taken])
        .run()
        .fails(70, "cannot listen on");
    rlock(&r)
        .args(["metrics", "--listen", "127.0.0.1:0", "--textfile", "x.prom"])
        .run()
        .fails(64, "cannot be used with");
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn the_textfile_is_replaced_whole_and_left_alone_when_redis_does_not_answer() {
    let r = Redis::shared();
    let dir = tmp_dir("textfile", "write");
    let path = dir.join("rlock.prom");
    let p = path.to_str().unwrap();
    rlock(&r).args(["acquire", "tf", "--ttl", "60s"]).run().ok();
    rlock(&r).args(["metrics", "--textfile", p]).run().ok();
    let first = std::fs::read_to_string(&path).unwrap();
    promtool_accepts(&first);
    assert_eq!(samples(&first)[r#"rlock_lock_holders{lock="tf"}"#], 1.0);
    // Rewritten whole; nothing else left in the directory.
    std::fs::write(&path, "stale").unwrap();
    rlock(&r).args(["metrics", "--textfile", p]).run().ok();
    assert!(read(&path).contains(r#"rlock_lock_holders{lock="tf"} 1"#));
    assert_eq!(names(&dir), ["rlock.prom"]);

    // Redis does not answer: exit 69, the file untouched (content and
    // mtime), no temporary file.
    let before = std::fs::metadata(&path).unwrap().modified().unwrap();
    let content = read(&path);
    let dead = format!("redis://127.0.0.1:{}", free_port());
    rlock(&r)
        .env("RLOCK_URL", &dead)
        .args(["metrics", "--textfile", p])
        .run()
        .fails(69, "127.0.0.1");
    assert_eq!(read(&path), content);
    assert_eq!(
        std::fs::metadata(&path).unwrap().modified().unwrap(),
        before
    );
    assert_eq!(names(&dir), ["rlock.prom"]);

    // Bad paths are usage errors, refused before connecting.
    let missing = dir.join("no/such.prom");
    rlock(&r)
        .args(["metrics", "--textfile", missing.to_str().unwrap()])
        .run()
        .fails(64, "directory does not exist");
    rlock(&r)
        .args(["metrics", "--textfile", dir.to_str().unwrap()])
        .run()
        .fails(64, "is a directory");
    assert_eq!(names(&dir), ["rlock.prom"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn promtool_accepts_the_plain_output() {
    let r = Redis::shared();
    rlock(&r)
        .args(["acquire", "pt", "--limit", "2", "--ttl", "60s"])
        .run()
        .ok();
    promtool_accepts(&rlock(&r).args(["metrics"]).run().ok().stdout);
}
