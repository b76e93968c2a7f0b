//! Clock checks: the server's clock against ours, and its drift.

#[allow(clippy::wildcard_imports)]
use super::*;

/// This host's clock against the server's TIME, and the round trip.
pub(super) fn clock(
    ctx: &Ctx,
    probe: &mut Probe,
    at: &str,
    report: &mut Report,
    facts: &mut Facts,
) {
    let mut samples: Vec<(Duration, f64)> = Vec::new();
    for _ in 0..SAMPLES {
        let before = SystemTime::now();
        let started = Instant::now();
        let reply: redis::RedisResult<(u64, u64)> = probe.query(&redis::cmd("TIME"));
        let rtt = started.elapsed();
        let (secs, micros) = match reply {
            Ok(t) => t,
            Err(e) => {
                report.add(
                    Severity::Warn,
                    at,
                    "clock",
                    format!("TIME refused ({}): clock not checked", short(&e)),
                    Some("allow +time for this user (rlock's scripts need it)".into()),
                );
                return;
            }
        };
        let server_ms = secs as f64 * 1e3 + micros as f64 / 1e3;
        let local = before.duration_since(UNIX_EPOCH).unwrap_or_default() + rtt / 2;
        samples.push((rtt, server_ms - local.as_secs_f64() * 1e3));
    }
    let mut rtts: Vec<Duration> = samples.iter().map(|s| s.0).collect();
    rtts.sort();
    let rtt = rtts[rtts.len() / 2];
    // The sample with the shortest round trip bounds the offset best.
    let offset = samples.iter().min_by_key(|s| s.0).map_or(0.0, |s| s.1);
    // Tenths of a millisecond; never "-0.0".
    let offset = (offset * 10.0).round() / 10.0 + 0.0;
    facts.rtt_ms = Some((rtt.as_secs_f64() * 1e6).round() / 1e3);
    facts.offset_ms = Some(offset);
    let margin = drift(ctx.ttl);
    let measured = format!(
        "offset {offset:+.1}ms from the server's TIME, round trip {} (median of {SAMPLES})",
        show(rtt)
    );
    let why = "leases are timed by the server's clock and this host's monotonic clock, \
               so an offset does not shorten them";
    if rtt > ctx.ttl / 3 {
        report.add(
            Severity::Unsafe,
            at,
            "clock",
            format!(
                "{measured}: longer than TTL/3 ({}), so exec's renewals cannot be confirmed in time",
                human(ctx.ttl / 3)
            ),
            Some("use a longer --ttl, or a Redis closer to this host".into()),
        );
    } else if offset.abs() > margin.as_secs_f64() * 1e3 {
        report.add(
            Severity::Warn,
            at,
            "clock",
            format!(
                "{measured}; {why}, but an offset beyond the drift margin ({} at TTL {}) \
                 says a clock is not synchronized, and Redis expires keys by its wall clock: \
                 when the server's clock is stepped to correct it, held locks end that much \
                 early",
                show(margin),
                human(ctx.ttl)
            ),
            Some("run NTP (chrony, systemd-timesyncd) on this host and the server, slewing rather than stepping".into()),
        );
    } else if rtt > margin {
        report.add(
            Severity::Warn,
            at,
            "clock",
            format!(
                "{measured}: the round trip exceeds the drift margin ({} at TTL {}); a \
                 lease still counts from when its request was sent, so it stays safe, but \
                 each keeps less than TTL - margin of validity",
                show(margin),
                human(ctx.ttl)
            ),
            Some("use a Redis closer to this host, or a longer --ttl".into()),
        );
    } else {
        report.add(
            Severity::Ok,
            at,
            "clock",
            format!(
                "{measured}: within the drift margin ({} at TTL {}); {why}",
                show(margin),
                human(ctx.ttl)
            ),
            None,
        );
    }
}

/// A duration with sub-millisecond precision.
pub(super) fn show(d: Duration) -> String {
    if d < Duration::from_millis(10) {
        format!("{:.2}ms", d.as_secs_f64() * 1e3)
    } else {
        human(d)
    }
}
