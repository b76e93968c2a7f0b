//! A TCP proxy that loses or delays script replies.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A TCP proxy in front of a Redis that can lose one script call's reply
/// after the server ran it, then refuse connections for a while: what a
/// client sees when the network goes away mid-call.
pub struct Proxy {
    pub port: u16,
    /// Lose the reply of the next EVAL/EVALSHA, then refuse for this long.
    pub lose_next: Arc<Mutex<Option<Duration>>>,
    /// Hold the reply of the next EVAL/EVALSHA back for this long.
    pub delay_next: Arc<Mutex<Option<Duration>>>,
    /// Hold the reply of every EVAL/EVALSHA back for this long.
    pub delay_all: Arc<Mutex<Option<Duration>>>,
}

impl Proxy {
    pub fn start(to: u16) -> Proxy {
        use std::io::{Read, Write};
        use std::net::{Shutdown, TcpListener, TcpStream};
        use std::sync::atomic::AtomicBool;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let lose_next: Arc<Mutex<Option<Duration>>> = Arc::new(Mutex::new(None));
        let delay_next: Arc<Mutex<Option<Duration>>> = Arc::new(Mutex::new(None));
        let delay_all: Arc<Mutex<Option<Duration>>> = Arc::new(Mutex::new(None));
        let refuse_until = Arc::new(Mutex::new(std::time::Instant::now()));
        let (lose, refuse, delay) = (lose_next.clone(), refuse_until.clone(), delay_next.clone());
        let every = delay_all.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if std::time::Instant::now() < *refuse.lock().unwrap() {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else {
                    continue;
                };
                let swallow = Arc::new(AtomicBool::new(false));
                let hold = Arc::new(Mutex::new(None::<std::time::Instant>));
                let (mut c_in, mut s_out) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (mut s_in, mut c_out) = (server, client);
                let (lose, refuse, sw) = (lose.clone(), refuse.clone(), swallow.clone());
                let (delay, hold_c, hold_s) = (delay.clone(), hold.clone(), hold.clone());
                let every = every.clone();
                let (c_kill, s_kill) = (c_out.try_clone().unwrap(), s_out.try_clone().unwrap());
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    while let Ok(n) = c_in.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        let eval = buf[..n].windows(4).any(|w| w == b"EVAL");
                        let cut = if eval {
                            lose.lock().unwrap().take()
                        } else {
                            None
                        };
                        if cut.is_some() {
                            sw.store(true, Ordering::SeqCst);
                        }
                        let d = eval
                            .then(|| delay.lock().unwrap().take().or(*every.lock().unwrap()))
                            .flatten();
                        if let Some(d) = d {
                            *hold_c.lock().unwrap() = Some(std::time::Instant::now() + d);
                        }
                        if s_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                        if let Some(d) = cut {
                            // Let the server run it, then cut the line.
                            std::thread::sleep(Duration::from_millis(200));
                            *refuse.lock().unwrap() = std::time::Instant::now() + d;
                            let _ = c_kill.shutdown(Shutdown::Both);
                            let _ = s_kill.shutdown(Shutdown::Both);
                            break;
                        }
                    }
                });
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    while let Ok(n) = s_in.read(&mut buf) {
                        if n == 0 || swallow.load(Ordering::SeqCst) {
                            break;
                        }
                        if let Some(t) = hold_s.lock().unwrap().take() {
                            std::thread::sleep(
                                t.saturating_duration_since(std::time::Instant::now()),
                            );
                        }
                        if c_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Proxy {
            port,
            lose_next,
            delay_next,
            delay_all,
        }
    }
}
