//! perf interop: `perf script` text (or a perf.data, through `perf script`) -> folded stacks
//! with inferno's perf collapser, so the same SVG comes from either route.

use std::io::Cursor;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use inferno::collapse::perf::{Folder, Options};
use inferno::collapse::Collapse;

/// Folded lines of `perf script` output (kernel frames marked `_[k]`).
pub fn collapse(script: &[u8]) -> Result<Vec<(String, u64)>> {
    let mut opts = Options::default();
    opts.annotate_kernel = true;
    let mut out = Vec::new();
    Folder::from(opts).collapse(Cursor::new(script), &mut out).context("collapsing perf script output")?;
    let text = String::from_utf8_lossy(&out);
    if text.trim().is_empty() {
        bail!("no stacks in the perf script output: record with call graphs (perf record -g) and pass 'perf script' output or the perf.data");
    }
    super::fold::parse(&text)
}

/// A perf.data file is run through `perf script`; anything else is taken as its text output.
pub fn read_input(path: &Path) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    // perf.data starts with the magic "PERFILE2".
    if !bytes.starts_with(b"PERFILE2") {
        return Ok(bytes);
    }
    let out = Command::new("perf")
        .arg("script")
        .arg("-i")
        .arg(path)
        .output()
        .context("running 'perf script' (install linux-perf, or pass 'perf script' output instead)")?;
    if !out.status.success() {
        bail!("'perf script -i {}' failed: {}", path.display(), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(out.stdout)
}
