//! The trace report's renderers from recorded reports (tests/data/reports/NAME: report.json and
//! raw.json, kept by real traces on the host and in the VM rig): each section of the text and of
//! the HTML page against its golden file, so a change to one section shows as a diff in one
//! file. `IOPATH_BLESS=1 cargo test --test render` writes them.

use std::path::{Path, PathBuf};

use iopath::model::RawTrace;
use iopath::report::Report;

fn reports() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/reports");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("report.json").exists())
        .collect();
    v.sort();
    assert!(v.len() >= 5, "recorded reports missing in {}: {v:?}", dir.display());
    v
}

fn load(dir: &Path) -> (Report, RawTrace) {
    let rep: Report = serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let raw: RawTrace = serde_json::from_slice(&std::fs::read(dir.join("raw.json")).unwrap()).unwrap();
    (rep, raw)
}

/// `got` against `dir/golden/file`; blessing writes it. Returns whether it matched.
fn golden(dir: &Path, file: &str, got: &str, diffs: &mut Vec<String>) {
    let path = dir.join("golden").join(file);
    if std::env::var_os("IOPATH_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, got).unwrap();
        return;
    }
    match std::fs::read_to_string(&path) {
        Ok(want) if want == got => {}
        Ok(want) => {
            let line = want.lines().zip(got.lines()).position(|(a, b)| a != b).unwrap_or(want.lines().count().min(got.lines().count()));
            diffs.push(format!("{} differs from line {}", path.display(), line + 1));
        }
        Err(_) => diffs.push(format!("{} missing (IOPATH_BLESS=1 writes it)", path.display())),
    }
}

#[test]
fn trace_reports_render_as_their_golden_files() {
    let mut diffs = Vec::new();
    for dir in reports() {
        let (rep, raw) = load(&dir);
        assert!(rep.trace.is_some(), "{}: a recorded trace without its trace", dir.display());
        let mut text = Vec::new();
        iopath::report::text::render_text(&rep, &mut text).unwrap();
        golden(&dir, "full.txt", &String::from_utf8(text).unwrap(), &mut diffs);
        golden(&dir, "full.html", &iopath::report::html::trace_page(&rep, &raw, &[]), &mut diffs);
    }
    assert!(diffs.is_empty(), "renderings changed (IOPATH_BLESS=1 to accept):\n{}", diffs.join("\n"));
}
