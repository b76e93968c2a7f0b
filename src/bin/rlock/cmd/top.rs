//! `top [PATTERN] [-d D] [--once]`: the locks in use, refreshed live.
//!
//! One thread: it polls the signalfd (INT, TERM, HUP, QUIT end the view;
//! WINCH redraws at the new size) and stdin (q quits) until the next
//! refresh is due, then reads every lock's overview (read-only, one status
//! script and one pipelined history read per lock). Leaving by any of
//! these paths drops the [`Screen`], which restores the terminal. A
//! refresh that fails keeps the last rows and says why in the header.

use std::time::{Duration, Instant};

use rlock::exit_code;
use rlock::signals::Blocked;

use crate::cli::{Global, Top};
use crate::errors;
use crate::frame::{Asked, Header, Look, arrange, frame};
use crate::out::print;
use crate::screen::{self, Screen};
use crate::setup::connect_listing;

/// Shortest and longest refresh period.
const EVERY: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(3600));

/// `top`: a live view on a terminal, one plain frame otherwise.
pub(crate) fn top(g: &Global, t: &Top) -> anyhow::Result<u8> {
    let (pattern, every, once) = (t.pattern.as_str(), t.delay.0, t.once);
    let mut look = Look {
        sort: t.sort,
        ..Look::default()
    };
    // Bad input is refused before connecting.
    rlock::lock::overview::check_pattern(pattern)?;
    if every < EVERY.0 || every > EVERY.1 {
        return Err(rlock::Error::invalid(format!(
            "-d {} is out of range: use 0.1s to 1h",
            crate::frame::short(every)
        ))
        .into());
    }
    let mut locker = connect_listing(g)?;
    let mut views = locker.overview(pattern)?;
    if t.json {
        let mut out = String::new();
        for v in arrange(&views, &look) {
            out.push_str(&view_json(v)?.to_string());
            out.push('\n');
        }
        print(&out)?;
        return Ok(exit_code::OK);
    }
    if once || !screen::is_tty(libc::STDOUT_FILENO) {
        let header = Header {
            pattern,
            every,
            error: None,
            live: false,
        };
        print(&(frame(&views, &header, None, &mut look).join("\n") + "\n"))?;
        return Ok(exit_code::OK);
    }
    let ends = [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGWINCH,
    ];
    let signals = Blocked::new(&ends)?;
    let screen = Screen::enter()?;
    let mut keys = screen::is_tty(libc::STDIN_FILENO);
    let mut error: Option<String> = None;
    let mut next = Instant::now() + every;
    let mut drawn_at = None;
    loop {
        let header = Header {
            pattern,
            every,
            error: error.as_deref(),
            live: true,
        };
        let size = screen::size();
        let resized = drawn_at.replace(size).is_some_and(|was| was != size);
        screen.draw(&frame(&views, &header, Some(size), &mut look), resized)?;
        // Until the next refresh: a key, a signal, or a resize (redraw).
        let refresh = loop {
            let left = next.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break true;
            }
            let mut fds = [pollin(signals.fd()), pollin(libc::STDIN_FILENO)];
            let n = if keys { 2 } else { 1 };
            let ms = libc::c_int::try_from(left.as_millis() + 1).unwrap_or(libc::c_int::MAX);
            // SAFETY: a valid array of `n` pollfds.
            if unsafe { libc::poll(fds.as_mut_ptr(), n, ms) } <= 0 {
                continue; // timeout (checked above) or EINTR
            }
            let mut resized = false;
            if fds[0].revents != 0 {
                while let Some(sig) = signals.take() {
                    if sig != libc::SIGWINCH {
                        drop(screen);
                        return Ok(exit_code::for_signal(sig));
                    }
                    resized = true;
                }
            }
            if keys && fds[1].revents != 0 {
                let typed = screen::read_keys();
                // (the rows a page scrolls: the screen less header and titles)
                match look.key(&typed, size.1.saturating_sub(4)) {
                    Asked::Quit => return Ok(exit_code::OK),
                    Asked::Redraw => resized = true,
                    Asked::Nothing => {}
                }
                // End of input: only signals end the view now.
                keys = !typed.is_empty();
            }
            if resized {
                break false;
            }
        };
        if refresh {
            match locker.overview(pattern) {
                Ok(v) => {
                    views = v;
                    error = None;
                }
                Err(e) => error = Some(e.render(&errors::flag)),
            }
            next = Instant::now() + every;
        }
    }
}

/// One lock as `top --once --json` prints it: its `status --json` object
/// and what the overview adds (see the help text).
fn view_json(v: &rlock::lock::LockView) -> anyhow::Result<serde_json::Value> {
    let mut j = serde_json::to_value(&v.status)?;
    let o = j
        .as_object_mut()
        .ok_or_else(|| anyhow::anyhow!("a status is a JSON object"))?;
    let ms = |d: Duration| rlock::duration::millis(d);
    let held = v.status.held.then(|| ms(v.held_for()));
    o.insert("held_ms".into(), held.into());
    let ttl = v.status.holders.iter().map(|h| h.ttl_ms).max();
    o.insert("ttl_ms".into(), ttl.into());
    o.insert("oldest_wait_ms".into(), v.oldest_wait.map(ms).into());
    o.insert("grants_last_minute".into(), v.grants_last_minute.into());
    let last = v.last_event.as_ref().map(crate::render::event_json);
    o.insert("last_event".into(), last.into());
    o.insert("counters".into(), serde_json::to_value(v.counters)?);
    o.insert(
        "server_time".into(),
        crate::render::rfc3339_ms(v.now_ms).into(),
    );
    Ok(j)
}

fn pollin(fd: libc::c_int) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}
