//! /proc/vmstat during a trace: dirty and writeback pages every 20 ms, and the pages dirtied
//! and written machine-wide between the start and the end (the truth the writeback table is
//! checked against). Reading it costs ~20 us: 50 times a second is 0.1% of a CPU, and a 100 ms
//! period missed the whole of a 64 MiB dd's dirty peak (max 5 pages seen).

use crate::model::RawVmstat;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub const PERIOD_MS: u64 = 20;

/// nr_dirty, nr_writeback, nr_dirtied, nr_written (None: /proc/vmstat unreadable).
fn read() -> Option<[u64; 4]> {
    let text = std::fs::read_to_string("/proc/vmstat").ok()?;
    let mut v = [None; 4];
    for line in text.lines() {
        let Some((k, n)) = line.split_once(' ') else { continue };
        let i = match k {
            "nr_dirty" => 0,
            "nr_writeback" => 1,
            "nr_dirtied" => 2,
            "nr_written" => 3,
            _ => continue,
        };
        v[i] = n.trim().parse().ok();
    }
    Some([v[0]?, v[1]?, v[2]?, v[3]?])
}

/// vm.dirty_background_* and vm.dirty_*: a ratio of available memory, or bytes when set.
fn thresholds() -> String {
    let vm = |k: &str| std::fs::read_to_string(format!("/proc/sys/vm/{k}")).map(|s| s.trim().to_owned());
    let one = |bytes: &str, ratio: &str| match (vm(bytes), vm(ratio)) {
        (Ok(b), _) if b != "0" => format!("{b} bytes"),
        (_, Ok(r)) => format!("{r}%"),
        _ => "unknown".to_owned(),
    };
    format!(
        "background writeback from {}, writers throttled from {}",
        one("dirty_background_bytes", "dirty_background_ratio"),
        one("dirty_bytes", "dirty_ratio")
    )
}

/// Samples until `stop`; None when /proc/vmstat cannot be read.
pub fn sample(stop: &AtomicBool) -> Option<RawVmstat> {
    let first = read()?;
    let mut out = RawVmstat { samples: vec![(first[0], first[1])], thresholds: thresholds(), ..Default::default() };
    let mut last = first;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(PERIOD_MS));
        if let Some(v) = read() {
            out.samples.push((v[0], v[1]));
            last = v;
        }
    }
    if let Some(v) = read() {
        out.samples.push((v[0], v[1]));
        last = v;
    }
    out.dirtied = last[2].saturating_sub(first[2]);
    out.written = last[3].saturating_sub(first[3]);
    Some(out)
}
