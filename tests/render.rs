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

/// Each (section, text) against `dir/golden/KIND/NN-section.EXT`, NN its place on the page; blessing
/// writes them. A golden file no section produces any more is a difference too.
fn golden(dir: &Path, kind: &str, ext: &str, sections: &[(&'static str, String)], diffs: &mut Vec<String>) {
    let folder = dir.join("golden").join(kind);
    let files: Vec<(String, &String)> =
        sections.iter().enumerate().map(|(i, (name, text))| (format!("{i:02}-{name}.{ext}"), text)).collect();
    if std::env::var_os("IOPATH_BLESS").is_some() {
        let _ = std::fs::remove_dir_all(&folder);
        std::fs::create_dir_all(&folder).unwrap();
        for (file, text) in &files {
            std::fs::write(folder.join(file), text).unwrap();
        }
        return;
    }
    for (file, got) in &files {
        let path = folder.join(file);
        match std::fs::read_to_string(&path) {
            Ok(want) if &want == *got => {}
            Ok(want) => {
                let line = want.lines().zip(got.lines()).position(|(a, b)| a != b);
                let line = line.unwrap_or(want.lines().count().min(got.lines().count()));
                diffs.push(format!("{} differs from line {}", path.display(), line + 1));
            }
            Err(_) => diffs.push(format!("{} missing (IOPATH_BLESS=1 writes it)", path.display())),
        }
    }
    if let Ok(rd) = std::fs::read_dir(&folder) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !files.iter().any(|(f, _)| *f == name) {
                diffs.push(format!("{}: no section renders it any more", e.path().display()));
            }
        }
    }
}

#[test]
fn trace_reports_render_section_by_section_as_their_golden_files() {
    let mut diffs = Vec::new();
    for dir in reports() {
        let (rep, raw) = load(&dir);
        assert!(rep.trace.is_some(), "{}: a recorded trace without its trace", dir.display());
        let text = iopath::report::text::text_sections(&rep);
        // The sections are the whole text, in order.
        let mut whole = Vec::new();
        iopath::report::text::render_text(&rep, &mut whole).unwrap();
        assert_eq!(String::from_utf8(whole).unwrap(), text.iter().map(|(_, t)| t.as_str()).collect::<String>());
        assert!(text.len() >= 13, "{}: {} text sections", dir.display(), text.len());
        golden(&dir, "text", "txt", &text, &mut diffs);

        let html = iopath::report::html::trace_page_sections(&rep, &raw, &[]);
        let page = iopath::report::html::trace_page(&rep, &raw, &[]);
        assert!(page.contains(&html.iter().map(|(_, h)| h.as_str()).collect::<String>()));
        golden(&dir, "html", "html", &html, &mut diffs);
    }
    assert!(diffs.is_empty(), "renderings changed (IOPATH_BLESS=1 to accept):\n{}", diffs.join("\n"));
}
