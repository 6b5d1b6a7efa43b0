//! `iopath sweep` for real (a small grid on a loop device) and the HTML reports rendered in
//! headless Chromium: the page loads without script errors and every plot has a size.

mod common;
use common::*;

use std::path::Path;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The DOM after load, as headless Chromium (Debian's chromium package) sees it.
fn rendered(page: &Path) -> String {
    let out = std::process::Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000", "--dump-dom"])
        .arg(format!("file://{}", page.canonicalize().unwrap().display()))
        .output()
        .expect("chromium (installed by scripts/setup.sh) renders the report");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `data-plots="ok/total"` set by the page's own check, and no `data-error`.
fn plots_ok(dom: &str) -> (usize, usize) {
    assert!(!dom.contains("data-error=\""), "the page reported a script error");
    let v = dom.split("data-plots=\"").nth(1).and_then(|r| r.split('"').next()).expect("the page's load check ran");
    let (ok, total) = v.split_once('/').unwrap();
    (ok.parse().unwrap(), total.parse().unwrap())
}

#[test]
fn sweep_runs_the_grid_and_its_page_renders() {
    require_root();
    let _s = serial();
    let d = scratch("html-sweep");
    let dev = LoopDev::new(&d.join("backing"), 64, 512);
    let out = d.join("sweep");
    let o = iopath(&[
        "sweep",
        "--engine",
        "uring,aio",
        "--qd",
        "1,8",
        "--repeat",
        "2",
        "--seed",
        "7",
        "--runtime",
        "1s",
        "--device",
        &dev.0,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let progress = String::from_utf8_lossy(&o.stderr);
    assert!(progress.contains("[8/8]") && progress.contains("s left"), "progress is shown: {progress}");
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("sweep.json")).unwrap()).unwrap();
    assert_eq!(s["schema"], "iopath.sweep/1");
    assert_eq!(s["partial"], false);
    let points = s["points"].as_array().unwrap();
    assert_eq!(points.len(), 4);
    for p in points {
        assert_eq!(p["runs"], 2);
        let (min, med, max) = (
            p["iops"]["min"].as_f64().unwrap(),
            p["iops"]["median"].as_f64().unwrap(),
            p["iops"]["max"].as_f64().unwrap(),
        );
        assert!(min > 0.0 && min <= med && med <= max, "{p}");
        // Phases only from a table that reconciled; otherwise null, and the run's report says why.
        let rep: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join(p["median_report"].as_str().unwrap())).unwrap()).unwrap();
        let reconciled = rep["reconciliation"]["reconciled"].as_bool().unwrap();
        match p["phases_ns"].as_array() {
            Some(ph) => assert!(reconciled && ph.iter().all(|v| v.as_f64().unwrap() > 0.0), "traced: {p}"),
            None => assert!(!reconciled && p["phases_ns"].is_null(), "{p}"),
        }
        assert!(p["irq_per_io"].as_f64().is_some(), "traced: {p}");
        assert!(out.join(p["median_report"].as_str().unwrap()).exists());
    }
    // The order is the seed's: the same seed gives the same order, kept in the run list.
    let order: Vec<String> =
        s["runs"].as_array().unwrap().iter().map(|r| format!("{} {} {}", r["variant"], r["qd"], r["rep"])).collect();
    let plan = iopath::sweep::plan(2, &[1, 8], 2, 7);
    let names = ["\"uring\"", "\"aio\""];
    let expected: Vec<String> = plan.iter().map(|p| format!("{} {} {}", names[p.variant], p.qd, p.rep)).collect();
    assert_eq!(order, expected);
    assert!(points.iter().any(|p| p["phases_ns"].is_array()), "no point's phases reconciled");
    let (ok, total) = plots_ok(&rendered(&out.join("report.html")));
    assert!(total >= 6 && ok == total, "{ok} of {total} plots rendered");
}

#[test]
fn trace_page_renders_with_its_flamegraph() {
    require_root();
    let _s = serial();
    let d = scratch("html-trace");
    let dev = LoopDev::new(&d.join("backing"), 64, 512);
    let out = d.join("t");
    let o = iopath(&[
        "trace",
        "--device",
        &dev.0,
        "--qd",
        "4",
        "--runtime",
        "1s",
        "--interval",
        "200ms",
        "--flamegraph",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    // The time series: IOPS and latency per 200 ms on one time axis, labelled.
    assert!(
        html.contains("<h2>Over time</h2>") && html.matches("class=\"plot lines time\"").count() == 2,
        "time plots"
    );
    assert!(html.matches(">time (s)</text>").count() == 2 && html.contains(">IOPS</text>"), "axis labels");
    // Self-contained: nothing fetched (namespace URIs in the SVGs are names, not requests).
    assert!(
        !html.contains("src=\"http") && !html.contains("<link") && !html.contains("<script src"),
        "no external resources"
    );
    assert!(html.contains("<iframe title=\"flamegraph\" srcdoc="), "the flamegraph is inline");
    let dom = rendered(&out.join("report.html"));
    let (ok, total) = plots_ok(&dom);
    assert!(total >= 7 && ok == total, "{ok} of {total} plots rendered");
}

#[test]
fn compare_page_renders_with_its_differential_flamegraph() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/compare-iommu");
    let d = scratch("html-compare");
    let o = iopath(&[
        "compare",
        data.join("before/report.json").to_str().unwrap(),
        data.join("after/report.json").to_str().unwrap(),
        "--out",
        d.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dom = rendered(&d.join("report.html"));
    let (ok, total) = plots_ok(&dom);
    assert!(total >= 2 && ok == total, "{ok} of {total} plots rendered");
    assert!(dom.contains("Differential on-CPU flamegraph"));
}

#[test]
fn ctrl_c_keeps_the_runs_that_finished() {
    require_root();
    let _s = serial();
    let d = scratch("html-sweep-int");
    let dev = LoopDev::new(&d.join("backing"), 64, 512);
    let out = d.join("sweep");
    let child = std::process::Command::new(bin())
        .args(["sweep", "--engine", "uring", "--qd", "1,2,4,8", "--repeat", "3", "--runtime", "1s", "--device", &dev.0])
        .args(["--no-trace", "--out", out.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(3500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("sweep.json")).unwrap()).unwrap();
    let runs = s["runs"].as_array().unwrap().len();
    assert!(s["partial"] == true && (1..12).contains(&runs), "{runs} runs kept, partial {}", s["partial"]);
    assert!(out.join("report.html").exists());
}
