//! The metrics endpoint: GET /metrics answers the last refresh's whole exposition with its
//! length (a scrape never reads a half-written page), anything else 404. One connection at a
//! time on one thread: a Prometheus scrape every 15 s is the load it is for.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use anyhow::{Context, Result};

use super::Exposition;

pub fn bind(addr: &str) -> Result<TcpListener> {
    let l = TcpListener::bind(addr).with_context(|| {
        format!("listening on {addr} for the metrics: is another iopath (or exporter) on that port? pick another --listen ADDR")
    })?;
    l.set_nonblocking(true).context("making the metrics listener non-blocking")?;
    Ok(l)
}

fn answer(mut c: TcpStream, exp: &Exposition) -> std::io::Result<()> {
    c.set_nonblocking(false)?;
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    c.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut req = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 16 << 10 {
        let n = c.read(&mut buf)?;
        if n == 0 {
            break;
        }
        req.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&req);
    let path = line.split_whitespace().nth(1).unwrap_or("");
    let (status, ctype, body) = if line.starts_with("GET ") && (path == "/metrics" || path.starts_with("/metrics?")) {
        let text = exp.lock().unwrap_or_else(|p| p.into_inner()).clone();
        ("200 OK", "application/openmetrics-text; version=1.0.0; charset=utf-8", text)
    } else {
        ("404 Not Found", "text/plain", std::sync::Arc::new("iopath: the metrics are at /metrics\n".to_owned()))
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes())?;
    c.write_all(body.as_bytes())?;
    c.flush()
}

/// Serves until the stop request.
pub fn serve(l: TcpListener, exp: Exposition) {
    while !crate::stop::requested() {
        match l.accept() {
            Ok((c, _)) => {
                let _ = answer(c, &exp);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}
