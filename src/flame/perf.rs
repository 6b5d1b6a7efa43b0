//! perf interop: `perf script` text (or a perf.data, through `perf script`) -> folded stacks
//! with inferno's perf collapser, so the same SVG comes from either route.

use std::io::Cursor;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use inferno::collapse::perf::{Folder, Options};
use inferno::collapse::Collapse;

/// Call-graph samples in `perf script` text: an event line (`comm pid ... event:`) followed by
/// indented `address symbol (dso)` frames. Checked before inferno sees the text: its collapser
/// asserts on input it cannot parse (a line of text with no event, a binary file) and would end
/// the process with a panic instead of a message.
pub fn samples(script: &[u8]) -> Result<usize> {
    const FIX: &str = "pass the text 'perf script' prints for a 'perf record -g' run, or the perf.data itself";
    if script.contains(&0) {
        bail!("this is not perf script text (it holds binary data): {FIX}");
    }
    let text = std::str::from_utf8(script).map_err(|e| anyhow::anyhow!("this is not perf script text ({e}): {FIX}"))?;
    let is_frame = |l: &str| {
        let t = l.trim_start();
        l.len() > t.len() && t.split_whitespace().next().is_some_and(|a| u64::from_str_radix(a, 16).is_ok())
    };
    let is_event = |l: &str| {
        !l.starts_with(char::is_whitespace)
            && !l.starts_with('#')
            && l.contains(':')
            && l.split_whitespace()
                .any(|f| f.split('/').all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())))
    };
    let lines: Vec<&str> = text.lines().collect();
    let n = lines.windows(2).filter(|w| is_event(w[0]) && is_frame(w[1])).count();
    if n == 0 {
        let what = if lines.iter().any(|l| is_event(l)) {
            "samples but no call graphs (record with 'perf record -g')"
        } else {
            "no perf samples (no 'comm pid ... event:' line followed by stack frames)"
        };
        bail!("{what}: {FIX}");
    }
    Ok(n)
}

/// Folded lines of `perf script` output (kernel frames marked `_[k]`).
pub fn collapse(script: &[u8]) -> Result<Vec<(String, u64)>> {
    samples(script)?;
    let mut opts = Options::default();
    opts.annotate_kernel = true;
    let mut out = Vec::new();
    // Validated above; a parse the collapser still cannot make must not end the process either.
    let folded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Folder::from(opts).collapse(Cursor::new(script), &mut out)
    }));
    match folded {
        Ok(r) => r.context("collapsing perf script output")?,
        Err(_) => bail!("inferno's perf collapser could not parse this perf script output: pass the text of 'perf script' unchanged"),
    }
    let text = String::from_utf8_lossy(&out);
    if text.trim().is_empty() {
        bail!("no stacks in the perf script output: record with call graphs (perf record -g) and pass 'perf script' output or the perf.data");
    }
    super::fold::parse(&text)
}

/// A perf.data file is run through `perf script`; anything else is taken as its text output.
pub fn read_input(path: &Path) -> Result<Vec<u8>> {
    let bytes = crate::input::read_bytes(path, crate::input::PERF_CAP, "perf script output or perf.data")?.to_vec();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_that_is_not_perf_script_is_refused_with_a_message() {
        for (input, want) in [
            (&b"a\n\n"[..], "no perf samples"),
            (b"\x7fELF\x02\x01\x00\x00binary", "binary data"),
            (b"\xff\xfe\xfd text", "not perf script text"),
            (b"", "no perf samples"),
            (b"fio  1234  9390.014207:    1001001 cpu-clock: \nfio  1234  9390.015: 1 cpu-clock: \n", "no call graphs"),
        ] {
            let e = collapse(input).unwrap_err().to_string();
            assert!(e.contains(want), "{input:?}: {e}");
            assert!(e.contains("perf record -g"), "{e}");
        }
    }

    #[test]
    fn recorded_perf_script_is_accepted() {
        let text = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/perf/uring-loop.script")).unwrap();
        assert!(samples(&text).unwrap() > 10);
        assert!(!collapse(&text).unwrap().is_empty());
    }
}
