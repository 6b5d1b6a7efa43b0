//! The metrics endpoint: GET /metrics answers the last refresh's whole exposition with its
//! length (a scrape never reads a half-written page), anything else 404. Each connection gets a
//! thread of its own with one deadline for the whole request and one for the answer, so an idle
//! or slow client (a byte every 1.5 s kept the single-threaded server of before past any
//! scraper's timeout) never delays another scrape; at most MAX_CONNECTIONS at once, the rest are
//! closed at once.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};

use super::Exposition;

/// Connections served at once; a Prometheus server holds one, a few more are a person's curl.
const MAX_CONNECTIONS: usize = 64;
/// The whole request must arrive within this ...
const READ_DEADLINE: Duration = Duration::from_secs(2);
/// ... and the answer leave within this.
const WRITE_DEADLINE: Duration = Duration::from_secs(5);

pub fn bind(addr: &str) -> Result<TcpListener> {
    let l = TcpListener::bind(addr).map_err(|e| {
        let hint = match e.kind() {
            std::io::ErrorKind::AddrInUse => {
                "the port is taken (another iopath or exporter?): pick another --listen ADDR"
            }
            std::io::ErrorKind::PermissionDenied => {
                "ports below 1024 need root or CAP_NET_BIND_SERVICE: pick a port above 1023 with --listen ADDR"
            }
            std::io::ErrorKind::AddrNotAvailable => {
                "no interface of this machine has that address: pick one it has (0.0.0.0 for all) with --listen ADDR"
            }
            _ => "pick another --listen ADDR",
        };
        anyhow!("listening on {addr} for the metrics: {e}: {hint}")
    })?;
    l.set_nonblocking(true).context("making the metrics listener non-blocking")?;
    Ok(l)
}

/// Reads one request's head (up to its blank line, 16 KiB at most) by `deadline`.
fn read_request(c: &mut TcpStream, deadline: Instant) -> std::io::Result<Vec<u8>> {
    let mut req = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 16 << 10 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        c.set_read_timeout(Some(left))?;
        let n = c.read(&mut buf)?;
        if n == 0 {
            break;
        }
        req.extend_from_slice(&buf[..n]);
    }
    Ok(req)
}

fn answer(mut c: TcpStream, exp: &Exposition) -> std::io::Result<()> {
    c.set_nonblocking(false)?;
    let req = read_request(&mut c, Instant::now() + READ_DEADLINE)?;
    let line = String::from_utf8_lossy(&req);
    let path = line.split_whitespace().nth(1).unwrap_or("");
    // HEAD is GET without the body (a health check's probe): the same status and length.
    let head_only = line.starts_with("HEAD ");
    let (status, ctype, body) =
        if (line.starts_with("GET ") || head_only) && (path == "/metrics" || path.starts_with("/metrics?")) {
            let text = exp.lock().unwrap_or_else(|p| p.into_inner()).clone();
            ("200 OK", "application/openmetrics-text; version=1.0.0; charset=utf-8", text)
        } else {
            ("404 Not Found", "text/plain", Arc::new("iopath: the metrics are at /metrics\n".to_owned()))
        };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    // One deadline for the answer: a client reading a byte at a time is cut off, not waited for.
    c.set_write_timeout(Some(WRITE_DEADLINE))?;
    let until = Instant::now() + WRITE_DEADLINE;
    let parts: &[&[u8]] = if head_only { &[head.as_bytes()] } else { &[head.as_bytes(), body.as_bytes()] };
    for part in parts {
        for chunk in part.chunks(64 << 10) {
            if Instant::now() >= until {
                return Err(std::io::ErrorKind::TimedOut.into());
            }
            c.write_all(chunk)?;
        }
    }
    c.flush()
}

/// Serves until the stop request: each connection on a thread of its own.
pub fn serve(l: TcpListener, exp: Exposition) {
    let open = Arc::new(AtomicUsize::new(0));
    while !crate::stop::requested() {
        match l.accept() {
            Ok((c, _)) => {
                if open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                    open.fetch_sub(1, Ordering::SeqCst);
                    drop(c);
                    continue;
                }
                let (exp, mine) = (exp.clone(), open.clone());
                let spawned = std::thread::Builder::new().name("iopath-http".into()).spawn(move || {
                    let _ = answer(c, &exp);
                    mine.fetch_sub(1, Ordering::SeqCst);
                });
                if spawned.is_err() {
                    open.fetch_sub(1, Ordering::SeqCst);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}
