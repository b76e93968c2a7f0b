//! The little of HTTP/1.x that `metrics --listen` speaks, as pure
//! functions: where a request's head ends, what it asks for, and the
//! bytes of a response. The socket side is in cmd/exporter.rs.
//!
//! Every response closes the connection (`Connection: close`), so there is
//! no keep-alive, no pipelining and no request body to skip: what follows
//! the head is never read.

/// The most a request head may take, request line and headers; a longer
/// one is answered 431 (Prometheus sends a few hundred bytes).
pub(crate) const MAX_HEAD: usize = 8192;

/// The Content-Type of the text exposition format 0.0.4.
pub(crate) const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The path the metrics are served at.
pub(crate) const METRICS_PATH: &str = "/metrics";

/// What the server does with a request head.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// GET /metrics: scrape.
    Metrics,
    /// Anything else: answer this status, no scrape.
    Refuse(Status),
}

/// A response status the server sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Ok,
    BadRequest,
    NotFound,
    MethodNotAllowed,
    HeadTooLarge,
}

impl Status {
    fn line(self) -> &'static str {
        match self {
            Status::Ok => "200 OK",
            Status::BadRequest => "400 Bad Request",
            Status::NotFound => "404 Not Found",
            Status::MethodNotAllowed => "405 Method Not Allowed",
            Status::HeadTooLarge => "431 Request Header Fields Too Large",
        }
    }
}

/// The length of the request head at the start of `buf`, its blank line
/// included, once it has arrived: CRLF CRLF, or LF LF (RFC 9112 allows a
/// bare LF as line end).
pub(crate) fn head_len(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The route of a complete request head: its request line decides; the
/// headers are not needed and not read. The path is matched without its
/// query string. A line that is not `METHOD SP /TARGET SP HTTP/1.x` is a
/// 400; an unknown path a 404 whatever the method; a method other than
/// GET on /metrics a 405.
pub(crate) fn route(head: &[u8]) -> Route {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Ok(line) = std::str::from_utf8(line) else {
        return Route::Refuse(Status::BadRequest);
    };
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Route::Refuse(Status::BadRequest);
    };
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    if !token(method)
        || !target.starts_with('/')
        || target.bytes().any(|b| b.is_ascii_control())
        || !matches!(version, "HTTP/1.0" | "HTTP/1.1")
    {
        return Route::Refuse(Status::BadRequest);
    }
    let path = target.split_once('?').map_or(target, |(p, _)| p);
    if path != METRICS_PATH {
        Route::Refuse(Status::NotFound)
    } else if method != "GET" {
        Route::Refuse(Status::MethodNotAllowed)
    } else {
        Route::Metrics
    }
}

/// The bytes of a response: status line, headers, `body`. A 405 says which
/// method is allowed.
pub(crate) fn response(status: Status, content_type: &str, body: &str) -> Vec<u8> {
    let allow = if status == Status::MethodNotAllowed {
        "Allow: GET\r\n"
    } else {
        ""
    };
    let mut out = format!(
        "HTTP/1.1 {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n",
        status.line(),
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// The plain-text response for a refused request: its status as body.
pub(crate) fn refusal(status: Status) -> Vec<u8> {
    response(
        status,
        "text/plain; charset=utf-8",
        &format!("{}\n", status.line()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_ends_at_the_first_blank_line() {
        assert_eq!(head_len(b"GET / HTTP/1.1\r\nHost: x\r\n"), None);
        assert_eq!(head_len(b"GET / HTTP/1.1\r\n\r\nbody"), Some(18));
        assert_eq!(head_len(b"GET / HTTP/1.0\n\n"), Some(16));
        assert_eq!(head_len(b"GET / HTTP/1.1\r\n\r\n\n\n"), Some(18));
        assert_eq!(head_len(b""), None);
    }

    #[test]
    fn get_metrics_scrapes_with_or_without_query_and_headers() {
        for head in [
            &b"GET /metrics HTTP/1.1\r\nHost: h:9650\r\nAccept: */*\r\n\r\n"[..],
            b"GET /metrics?name[]=x HTTP/1.1\r\n\r\n",
            b"GET /metrics HTTP/1.0\n\n",
        ] {
            assert_eq!(route(head), Route::Metrics, "{head:?}");
        }
    }

    #[test]
    fn other_paths_are_404_other_methods_405() {
        for (head, want) in [
            (&b"GET / HTTP/1.1\r\n\r\n"[..], Status::NotFound),
            (b"GET /metrics/ HTTP/1.1\r\n\r\n", Status::NotFound),
            (b"GET /metricsx HTTP/1.1\r\n\r\n", Status::NotFound),
            (b"POST /other HTTP/1.1\r\n\r\n", Status::NotFound),
            (b"POST /metrics HTTP/1.1\r\n\r\n", Status::MethodNotAllowed),
            (b"HEAD /metrics HTTP/1.1\r\n\r\n", Status::MethodNotAllowed),
            (b"get /metrics HTTP/1.1\r\n\r\n", Status::MethodNotAllowed),
        ] {
            assert_eq!(route(head), Route::Refuse(want), "{head:?}");
        }
    }

    #[test]
    fn malformed_request_lines_are_400() {
        for head in [
            &b"\r\n\r\n"[..],
            b"GET\r\n\r\n",
            b"GET /metrics\r\n\r\n",
            b"GET  /metrics HTTP/1.1\r\n\r\n",
            b"GET /metrics HTTP/1.1 x\r\n\r\n",
            b"GET /metrics HTTP/2.0\r\n\r\n",
            b"GET metrics HTTP/1.1\r\n\r\n",
            b"GET http://h/metrics HTTP/1.1\r\n\r\n",
            b"G(T /metrics HTTP/1.1\r\n\r\n",
            b"GET /met\x7frics HTTP/1.1\r\n\r\n",
            b"GET /m\xffetrics HTTP/1.1\r\n\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n\n",
        ] {
            assert_eq!(route(head), Route::Refuse(Status::BadRequest), "{head:?}");
        }
    }

    #[test]
    fn responses_carry_length_type_and_close() {
        let r = String::from_utf8(response(Status::Ok, TEXT_FORMAT, "a 1\n")).unwrap();
        assert_eq!(
            r,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
             Content-Length: 4\r\nConnection: close\r\n\r\na 1\n"
        );
        let r = String::from_utf8(refusal(Status::MethodNotAllowed)).unwrap();
        assert!(r.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{r}");
        assert!(r.contains("\r\nAllow: GET\r\n"), "{r}");
        let r = String::from_utf8(refusal(Status::NotFound)).unwrap();
        assert!(!r.contains("Allow:"), "{r}");
        assert!(r.ends_with("\r\n\r\n404 Not Found\n"), "{r}");
    }
}
