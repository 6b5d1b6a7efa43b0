//! What the user hands iopath to read (reports, sweeps, `perf script` text, fio JSON, events
//! files): never a device, never without a size cap, and once. `iopath compare /dev/zero r.json`
//! grew to 4.2 GB in 4 s before the OOM killer took it, `/dev/urandom` never returned, and a pipe
//! (`<(...)`) gives its bytes one time while compare reads a side in three places.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};

/// The largest JSON file iopath reads: its own reports are under 2 MiB, a sweep's summary and
/// raw.json a few MiB; 256 MiB is far past any and well inside memory.
pub const JSON_CAP: u64 = 256 << 20;
/// `perf script` text: a minute of 4 kHz sampling on 64 CPUs with deep stacks is a few GiB.
pub const PERF_CAP: u64 = 4 << 30;

static READ: Mutex<Option<HashMap<PathBuf, Arc<Vec<u8>>>>> = Mutex::new(None);

/// Refuses what can only be a mistake to read as `what`: a device (endless or someone's disk), a
/// folder. Pipes and FIFOs are read (with the cap).
pub fn check_readable(path: &Path, what: &str) -> Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let m = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    let t = m.file_type();
    if t.is_char_device() || t.is_block_device() {
        bail!("{}: a device, not {what}: give the file iopath (or the tool) wrote", path.display());
    }
    if t.is_dir() {
        bail!("{}: a folder, not {what}: give the file", path.display());
    }
    // What iopath reads, no output of this run may replace (output::protect).
    crate::output::protect(path, &format!("an input ({what})"));
    Ok(())
}

/// The bytes of `path`, at most `cap` of them, read from the file system once per process (a
/// later call for the same path gets the same bytes: a pipe is not read twice).
pub fn read_bytes(path: &Path, cap: u64, what: &str) -> Result<Arc<Vec<u8>>> {
    if let Some(b) = READ.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::new).get(path) {
        return Ok(b.clone());
    }
    check_readable(path, what)?;
    let m = std::fs::metadata(path)?;
    let mib = |n: u64| n >> 20;
    if m.is_file() && m.len() > cap {
        bail!(
            "{}: {} MiB, more than {what} can be ({} MiB at most): not the file you meant?",
            path.display(),
            mib(m.len()),
            mib(cap)
        );
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(cap + 1).read_to_end(&mut bytes))
        .with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() as u64 > cap {
        bail!("{}: more than {} MiB, more than {what} can be: not the file you meant?", path.display(), mib(cap));
    }
    let bytes = Arc::new(bytes);
    READ.lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(path.to_path_buf(), bytes.clone());
    Ok(bytes)
}

/// `read_bytes` as UTF-8 text.
pub fn read_text(path: &Path, cap: u64, what: &str) -> Result<String> {
    let b = read_bytes(path, cap, what)?;
    String::from_utf8(b.to_vec()).with_context(|| format!("{}: not text (binary?), not {what}", path.display()))
}

/// A JSON file iopath wrote (a report, a sweep, raw.json) or fio's JSON output.
pub fn read_json_text(path: &Path) -> Result<String> {
    read_text(path, JSON_CAP, "a JSON report")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_refused_and_sizes_capped() {
        let e = read_bytes(Path::new("/dev/zero"), JSON_CAP, "a JSON report").unwrap_err().to_string();
        assert!(e.contains("a device, not a JSON report"), "{e}");
        let d = std::env::temp_dir().join(format!("iopath-input-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("big.json");
        std::fs::write(&f, vec![b' '; 2048]).unwrap();
        let e = read_bytes(&f, 1024, "a JSON report").unwrap_err().to_string();
        assert!(e.contains("more than a JSON report can be"), "{e}");
        assert!(read_bytes(&d, JSON_CAP, "a JSON report").unwrap_err().to_string().contains("a folder"));
        // Read once: the second read of a path gets the first's bytes, even after the file went.
        let g = d.join("r.json");
        std::fs::write(&g, b"{}").unwrap();
        assert_eq!(read_text(&g, JSON_CAP, "x").unwrap(), "{}");
        std::fs::remove_file(&g).unwrap();
        assert_eq!(read_text(&g, JSON_CAP, "x").unwrap(), "{}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
