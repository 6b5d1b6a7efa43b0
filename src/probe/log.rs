//! libbpf's messages: shown with `-v`, otherwise kept so that a failure can quote the line that
//! explains it ("failed to create kprobe ... -ENOENT") instead of libbpf's generic error.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use libbpf_rs::PrintLevel;

static VERBOSE: AtomicBool = AtomicBool::new(false);
static LAST: Mutex<Vec<String>> = Mutex::new(Vec::new());
const KEEP: usize = 8;

fn callback(level: PrintLevel, msg: String) {
    if VERBOSE.load(Ordering::Relaxed) {
        eprint!("{msg}");
    }
    if matches!(level, PrintLevel::Warn) {
        if let Ok(mut last) = LAST.lock() {
            if last.len() == KEEP {
                last.remove(0);
            }
            last.push(msg.trim_end().to_owned());
        }
    }
}

/// Routes libbpf's output through iopath; call once at start.
pub fn init(verbose: bool) {
    VERBOSE.store(verbose, Ordering::Relaxed);
    let level = if verbose { PrintLevel::Debug } else { PrintLevel::Warn };
    libbpf_rs::set_print(Some((level, callback)));
}

/// Forgets earlier warnings (before an attempt whose failure we want to explain).
pub fn clear() {
    if let Ok(mut last) = LAST.lock() {
        last.clear();
    }
}

/// The most telling libbpf warning since `clear`: the first line that names an errno.
pub fn reason() -> Option<String> {
    let last = LAST.lock().ok()?;
    last.iter().find(|l| l.contains("-E") && !l.contains("try raising")).or(last.first()).cloned()
}

/// The program libbpf named in its warnings since `clear` ("prog 'X': ..."), if any.
pub fn failing_prog() -> Option<String> {
    let last = LAST.lock().ok()?;
    last.iter().find_map(|l| failing_prog_in(l))
}

/// The program a libbpf failure names ("prog 'X': BPF program load failed: ...").
pub fn failing_prog_in(log_line: &str) -> Option<String> {
    let rest = &log_line[log_line.find("prog '")? + 6..];
    Some(rest[..rest.find('\'')?].to_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn failing_prog_is_read_from_libbpfs_message() {
        let line = "libbpf: prog 'nvme_queue_rq_exit': BPF program load failed: -EPERM";
        assert_eq!(super::failing_prog_in(line).as_deref(), Some("nvme_queue_rq_exit"));
        assert_eq!(super::failing_prog_in("libbpf: failed to load object"), None);
    }
}
