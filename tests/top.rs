//! `iopath top` and `iopath serve` against what the workload measured itself: the terminal UI
//! driven in tmux, the text mode, and a real Prometheus server scraping the endpoint.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The bundled generator in the background, its JSON report to `out`.
fn generator(args: &[&str], out: &Path) -> Child {
    Command::new(bin())
        .arg("run")
        .args(args)
        .args(["--json", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the generator starts")
}

/// The generator inside blkio cgroup `cg` (its pid is the shell's: exec keeps it).
fn generator_in(cg: &Blkio, args: &[&str], out: &Path) -> Child {
    let cmd = format!("echo $$ > {}/cgroup.procs && exec \"$0\" run \"$@\"", cg.0.display());
    Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .arg(bin())
        .args(args)
        .args(["--json", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the generator starts")
}

fn finish(mut c: Child, out: &Path) -> Value {
    assert!(c.wait().unwrap().success(), "the generator failed");
    serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap()
}

/// The generator's own IOPS over its seconds [from, to) (its per-second time series).
fn own_iops(r: &Value, from: usize, to: usize) -> f64 {
    let pts = r["timeseries"]["points"].as_array().unwrap();
    let v: Vec<f64> = pts[from..to.min(pts.len())].iter().map(|p| p["iops"].as_f64().unwrap()).collect();
    v.iter().sum::<f64>() / v.len() as f64
}

/// A tmux session of our own, killed on drop.
struct Tmux(String);

impl Tmux {
    fn start(name: &str, cmd: &str) -> Tmux {
        let _ = Command::new("tmux").args(["kill-session", "-t", name]).status();
        sh("tmux", &["new-session", "-d", "-s", name, "-x", "220", "-y", "40", cmd]);
        Tmux(name.into())
    }

    fn screen(&self) -> String {
        sh("tmux", &["capture-pane", "-p", "-t", &self.0])
    }

    fn keys(&self, k: &str) {
        sh("tmux", &["send-keys", "-t", &self.0, k]);
    }

    fn alive(&self) -> bool {
        Command::new("tmux").args(["has-session", "-t", &self.0]).stderr(Stdio::null()).status().unwrap().success()
    }

    /// Waits until the screen shows `what`.
    fn wait_for(&self, what: &str, secs: u64) -> String {
        let end = Instant::now() + Duration::from_secs(secs);
        loop {
            let s = self.screen();
            if s.contains(what) || Instant::now() > end {
                return s;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["kill-session", "-t", &self.0]).stderr(Stdio::null()).status();
    }
}

/// The rows whose PID is `pid` (one per disk, route and direction), each with its IOPS column.
fn rows_of(screen: &str, pid: u32) -> Vec<(f64, String)> {
    screen
        .lines()
        .filter(|l| l.split_whitespace().next() == Some(&pid.to_string()))
        .map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            // PID COMM CGROUP DISK ROUTE OP IOPS ...
            (cols[6].parse().unwrap(), l.to_owned())
        })
        .collect()
}

#[test]
fn top_shows_the_generators_row_with_its_own_iops() {
    require_root();
    let _s = serial();
    let d = scratch("top-tui");
    let dev = LoopDev::direct(&d.join("backing"), 256);
    let tmux = Tmux::start("iopath-top-test", &format!("{} top --phases --sort iops", bin()));
    assert!(tmux.wait_for("iopath top", 20).contains("iopath top"), "{}", tmux.screen());
    let out = d.join("run.json");
    // A steady rate, so that top's one-second frames and the generator's own seconds, which
    // start at different instants, count alike (unthrottled, the loop device's rate swings
    // 150k..210k from one second to the next here): 20000 IOPS by a blkio limit, in a cgroup
    // the row must name.
    let devnum = std::fs::read_to_string(format!("/sys/block/{}/dev", dev.0.trim_start_matches("/dev/"))).unwrap();
    let cg = Blkio::new("iopath-top-test", "blkio.throttle.read_iops_device", &format!("{} 20000", devnum.trim()));
    let g = generator_in(&cg, &["--engine", "uring", "--qd", "8", "--device", &dev.0, "--runtime", "8s"], &out);
    let pid = g.id();
    // Three refreshes inside the run's steady part, each read after a refresh. A process's I/Os
    // can take more than one route (io_uring punts to its workers what cannot be issued without
    // blocking): its IOPS is the sum of its rows.
    let mut seen: Vec<Vec<(f64, String)>> = Vec::new();
    std::thread::sleep(Duration::from_millis(2500));
    for _ in 0..3 {
        let rows = rows_of(&tmux.screen(), pid);
        if !rows.is_empty() {
            seen.push(rows);
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    // Keys: sort by bandwidth, group by cgroup, quit.
    tmux.keys("s");
    let sorted = tmux.wait_for("sorted by MB/s", 5);
    tmux.keys("c");
    let grouped = tmux.wait_for("by cgroup", 5);
    let r = finish(g, &out);
    tmux.keys("q");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!tmux.alive(), "q quits");
    assert!(sorted.contains("sorted by MB/s"), "{sorted}");
    assert!(grouped.contains("by cgroup"), "{grouped}");
    assert!(seen.len() >= 2, "the generator's row (pid {pid}) on screen: {seen:?}");
    let main = seen.iter().flatten().max_by(|a, b| a.0.total_cmp(&b.0)).map(|r| r.1.clone()).unwrap();
    assert!(
        main.contains("uring") && main.contains("read") && main.contains(dev.0.trim_start_matches("/dev/")),
        "{main}"
    );
    assert!(main.contains("/iopath-top-test"), "the row names the generator's cgroup: {main}");
    // The frames read at 2.5, 3.5 and 4.5 s each cover the second before: together some three
    // seconds inside the generator's [1, 5). Their mean, not one frame: one frame of one row read
    // 16902 against the generator's 18998 on another host, with neither the other rows nor the
    // generator's seconds kept to tell which; both are printed now.
    let per_frame: Vec<f64> = seen.iter().map(|rows| rows.iter().map(|r| r.0).sum()).collect();
    let iops = per_frame.iter().sum::<f64>() / per_frame.len() as f64;
    let secs: Vec<f64> =
        r["timeseries"]["points"].as_array().unwrap().iter().map(|p| p["iops"].as_f64().unwrap()).collect();
    let own = own_iops(&r, 1, 5);
    // Top's seconds start at other instants than the generator's: when the generator's own
    // seconds differ by more than 10% (a host that cannot hold the limit), that much more.
    let win = &secs[1..5.min(secs.len())];
    let spread = (win.iter().copied().fold(f64::MIN, f64::max) - win.iter().copied().fold(f64::MAX, f64::min)) / own;
    let allowed = 0.10f64.max(spread);
    let off = (iops - own).abs() / own;
    eprintln!(
        "top frames {per_frame:.0?} (mean {iops:.0}) from rows {seen:?}; the generator's seconds {secs:.0?}, {own:.0} over [1, 5) ({:+.1}%, allowed {:.1}%)",
        (iops - own) / own * 100.0,
        allowed * 100.0
    );
    assert!(
        off <= allowed,
        "top showed {iops:.0} IOPS, the generator measured {own:.0} over the same seconds ({:.1}% off, allowed {:.1}%)",
        off * 100.0,
        allowed * 100.0
    );
}

#[test]
fn top_batch_counts_every_io_of_a_run() {
    require_root();
    let _s = serial();
    let d = scratch("top-batch");
    let dev = LoopDev::direct(&d.join("backing"), 256);
    let top = Command::new(bin())
        .args(["top", "--phases", "--batch", "--count", "6", "--by", "process"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let out = d.join("run.json");
    let g = generator(&["--engine", "psync", "--jobs", "2", "--device", &dev.0, "--ios", "20000"], &out);
    let pid = g.id();
    let r = finish(g, &out);
    let disk = dev.0.trim_start_matches("/dev/");
    let o = top.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    // Every frame's row of the generator: psync is the sync route, and its I/Os add up to the
    // generator's count (the row's IOPS x the frame's seconds).
    let mut ios = 0.0;
    let mut frame_s = 0.0;
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("iopath top: ") {
            frame_s = rest.split(" in ").nth(1).and_then(|x| x.split(' ').next()).unwrap().parse::<f64>().unwrap();
        } else if l.split_whitespace().next() == Some(&pid.to_string()) && l.split_whitespace().nth(3) == Some(disk) {
            // Its rows on other disks are its own start-up and output (pagecache, writeback).
            assert!(l.contains(" sync ") && l.contains(" read "), "{l}");
            // Always-on: no syscall hook, so no submission or completion of its own ("-").
            let f: Vec<&str> = l.split_whitespace().collect();
            assert!(f[8] == "-/-" && f[11] == "-/-" && f[10] != "-/-", "sync I/O shows block and device only: {l}");
            ios += f[6].parse::<f64>().unwrap() * frame_s;
        }
    }
    let own = r["ios"].as_f64().unwrap();
    assert!((ios - own).abs() <= own * 0.01 + 2.0, "top counted {ios:.0} I/Os, the generator did {own}:\n{text}");
}

/// A Prometheus server of ours (Debian's package), scraping `target` every second, with its
/// data in `dir`; stopped on drop.
struct Prometheus {
    child: Child,
    port: u16,
}

impl Prometheus {
    fn start(dir: &Path, target: &str, port: u16) -> Prometheus {
        let cfg = dir.join("prometheus.yml");
        std::fs::write(
            &cfg,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: iopath\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
            .spawn()
            .expect("prometheus (Debian's package; scripts/setup.sh installs it)");
        Prometheus { child, port }
    }

    /// An instant query's answer (Null while the server is not up yet).
    fn query(&self, q: &str) -> Value {
        let out = Command::new("curl")
            .args(["-s", "--get", "--data-urlencode", &format!("query={q}")])
            .arg(format!("http://127.0.0.1:{}/api/v1/query", self.port))
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    /// The first sample's value of an instant query (None: no data yet).
    fn value(&self, q: &str) -> Option<f64> {
        let v = self.query(q);
        v["data"]["result"].as_array()?.first()?["value"][1].as_str()?.parse().ok()
    }

    fn target_up(&self) -> bool {
        self.value("up{job=\"iopath\"}") == Some(1.0)
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn prometheus_scrapes_serve_and_its_quantile_matches_the_trace() {
    require_root();
    let _s = serial();
    let d = scratch("top-prometheus");
    let dev = LoopDev::direct(&d.join("backing"), 256);
    let disk = dev.0.trim_start_matches("/dev/").to_owned();
    // Other BPF tools (another iopath) may hold programs of the same name: serve's are those
    // above this count.
    let loaded = || sh("bpftool", &["prog", "show"]).matches("name rq_complete_btf").count();
    let before = loaded();
    let serve = Command::new(bin())
        .args(["serve", "--phases", "--listen", "127.0.0.1:19435"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let prom = Prometheus::start(&d, "127.0.0.1:19435", 19090);
    wait("Prometheus to scrape iopath", 60, || prom.target_up());
    // The same run traced by iopath itself: its device-phase p99 is the reference.
    let r = json_of("trace", &["--engine", "aio", "--qd", "4", "--device", &dev.0, "--runtime", "4s"]);
    let own_p99 = r["phases"]["device"]["p99_ns"].as_f64().unwrap() / 1e9;
    let ios = r["ios"].as_f64().unwrap();
    // The run's I/Os, all scraped (the counter holds still once the run ended).
    let sel = format!("disk=\"{disk}\",route=\"aio\",op=\"read\"");
    wait("the run's I/Os in Prometheus", 30, || {
        prom.value(&format!("sum(iopath_ios_total{{{sel}}})")).is_some_and(|n| n >= ios * 0.99)
    });
    let scraped = prom.value(&format!("sum(iopath_ios_total{{{sel}}})")).unwrap();
    eprintln!("scraped {scraped} I/Os, the trace {ios}");
    assert!((scraped - ios).abs() <= ios * 0.01, "Prometheus holds {scraped} I/Os, the trace counted {ios}");
    let q = prom
        .value(&format!(
            "histogram_quantile(0.99, sum by (le) (increase(iopath_io_latency_seconds_bucket{{{sel},phase=\"device\"}}[1m])))"
        ))
        .expect("a device-phase quantile");
    let off = (q - own_p99).abs() / own_p99;
    eprintln!("device p99: Prometheus {:.1} us, the trace {:.1} us", q * 1e6, own_p99 * 1e6);
    assert!(
        off <= 0.10,
        "histogram_quantile(0.99) of the device phase {:.1} us, the trace's own p99 {:.1} us ({:.1}% off)",
        q * 1e6,
        own_p99 * 1e6,
        off * 100.0
    );
    // The probe set and the lost-event counters are exported too.
    assert!(prom.value("count(iopath_probe_info{attached=\"true\"})").unwrap() >= 5.0);
    assert!(prom.value("count(iopath_lost_events_total)").unwrap() >= 5.0);
    // Every query of the Grafana dashboard in the repository runs on this data; the panels
    // drawn from I/O this run made are not empty.
    let dash: Value = serde_json::from_slice(
        &std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/fleet/grafana-dashboard.json")).unwrap(),
    )
    .unwrap();
    for panel in dash["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().unwrap() {
            let q = t["expr"]
                .as_str()
                .unwrap()
                .replace("$disk", ".*")
                .replace("$cgroup", ".*")
                .replace("$__rate_interval", "1m");
            let v = prom.query(&q);
            assert_eq!(v["status"], "success", "{}: {q}: {v}", panel["title"]);
            let n = v["data"]["result"].as_array().map_or(0, |r| r.len());
            let needs_io =
                !["Interrupts", "Context", "IOMMU"].iter().any(|w| panel["title"].as_str().unwrap().contains(w));
            assert!(n > 0 || !needs_io, "{}: no data for {q}", panel["title"]);
        }
    }
    // SIGTERM: the probes detach and it exits cleanly.
    // SAFETY: kill with a pid we spawned.
    unsafe { libc::kill(serve.id() as i32, libc::SIGTERM) };
    let o = serve.wait_with_output().unwrap();
    assert!(o.status.success(), "serve on SIGTERM: {}", String::from_utf8_lossy(&o.stderr));
    // The kernel frees a closed program shortly after its last link and fd go (measured: up to
    // ~2 s here): poll.
    wait("serve's programs to be unloaded after SIGTERM", 15, || loaded() <= before);
}

#[test]
fn bad_top_and_serve_input_is_refused_clearly() {
    require_root();
    let _s = serial();
    // No terminal for the live view.
    let e = fails(&["top"]);
    assert!(e.contains("needs a terminal") && e.contains("--batch"), "{e}");
    let e = fails(&["top", "--once", "--count", "3"]);
    assert!(e.contains("--once is one refresh"), "{e}");
    let e = fails(&["top", "--count", "3"]);
    assert!(e.contains("needs a terminal") || e.contains("--count applies to --batch"), "{e}");
    // A port already taken: refused before any probe loads.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let e = fails(&["serve", "--listen", &addr]);
    assert!(e.contains(&addr) && e.contains("in use") && e.contains("pick another --listen"), "{e}");
    let e = fails(&["serve", "--listen", "not-an-address"]);
    assert!(e.contains("not-an-address"), "{e}");
    let e = fails(&["top", "--batch", "--interval", "0s"]);
    assert!(e.contains("interval"), "{e}");
}

/// `iopath serve` as the unit in docs/fleet/iopath.service runs it: not root, only the
/// capabilities the unit grants (setpriv as uid 65534 with them ambient).
fn serve_with_caps(caps: &str, bin_copy: &Path, port: u16) -> Child {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(format!("--inh-caps={caps}"))
        .arg(format!("--ambient-caps={caps}"))
        .arg(bin_copy)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn serve_runs_without_root_with_the_units_capabilities() {
    require_root();
    let _s = serial();
    let d = scratch("top-caps");
    let dev = LoopDev::direct(&d.join("backing"), 64);
    // A copy uid 65534 can execute (the build tree may not be readable to it).
    let copy = Path::new("/tmp/iopath-caps-test");
    std::fs::copy(bin(), copy).unwrap();
    sh("chmod", &["755", copy.to_str().unwrap()]);
    let unit = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/fleet/iopath.service")).unwrap();
    let granted: Vec<String> = unit
        .lines()
        .find_map(|l| l.strip_prefix("AmbientCapabilities="))
        .unwrap()
        .split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect();
    // CAP_SYS_RESOURCE is for kernels before 5.11; a host (this VM) may not even have it in
    // its bounding set, and setpriv cannot grant what the bounding set lacks.
    let bnd = std::fs::read_to_string("/proc/self/status").unwrap();
    let bnd = u64::from_str_radix(bnd.lines().find_map(|l| l.strip_prefix("CapBnd:")).unwrap().trim(), 16).unwrap();
    let granted: Vec<String> = granted.into_iter().filter(|c| c != "+sys_resource" || bnd & (1 << 24) != 0).collect();
    assert!(granted.len() >= 4, "{granted:?}");
    let mut s = serve_with_caps(&granted.join(","), copy, 19440);
    let scrape = || {
        let m = Command::new("curl").args(["-s", "http://127.0.0.1:19440/metrics"]).output().unwrap();
        String::from_utf8_lossy(&m.stdout).into_owned()
    };
    // Its probes attached before the I/O (loading them takes seconds on a busy host).
    wait("serve's probes attached", 30, || scrape().contains("iopath_probe_info{"));
    let o = iopath(&["run", "--engine", "psync", "--device", &dev.0, "--ios", "5000"]);
    assert!(o.status.success());
    std::thread::sleep(Duration::from_millis(2500));
    let m = scrape();
    // SAFETY: kill with a pid we spawned.
    unsafe { libc::kill(s.id() as i32, libc::SIGTERM) };
    assert!(s.wait().unwrap().success());
    let disk = dev.0.trim_start_matches("/dev/");
    let n: u64 = m
        .lines()
        .filter(|l| l.starts_with("iopath_ios_total{") && l.contains(&format!("disk=\"{disk}\"")))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    // Every I/O counted, or counted lost: one in 5000 was once left unclosed in CI and counted
    // "expired (never closed)" when its thread's next pread found its slot (0 in 40000 here).
    let expired: u64 = m
        .lines()
        .find_map(|l| l.strip_prefix("iopath_lost_events_total{reason=\"expired (never closed)\"} "))
        .map_or(0, |v| v.parse().unwrap());
    assert!(n + expired == 5000 && expired <= 2, "as uid 65534 with {granted:?}: {n} + {expired} expired: {m}");
    // The kernel's own count of skipped program runs is shown beside them (0 or more).
    assert!(m.contains("iopath_lost_events_total{reason=\"recursion misses\"} "), "{m}");
    // Each of the three it needs on this kernel, dropped: refused, naming what is missing.
    for (drop, says) in
        [("syslog", "CAP_SYSLOG"), ("dac_read_search", "CAP_DAC_READ_SEARCH"), ("perfmon", "CAP_PERFMON")]
    {
        let caps: Vec<&str> = granted.iter().map(String::as_str).filter(|c| *c != format!("+{drop}")).collect();
        let o = serve_with_caps(&caps.join(","), copy, 19441).wait_with_output().unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "without {drop}: {e}");
        assert!(e.contains(says), "without {drop}: {e}");
    }
    let _ = std::fs::remove_file(copy);
}

/// `iopath serve --listen 127.0.0.1:0 --interval 1s ARGS`, and the address it says it listens on
/// (its stderr drained after). ARGS start with --phases for the full set.
fn serve_on_any_port(args: &[&str]) -> (Child, String) {
    use std::io::BufRead;
    let mut serve = Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--interval", "1s"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(serve.stderr.take().unwrap());
    let (mut line, mut addr) = (String::new(), String::new());
    while err.read_line(&mut line).unwrap() > 0 {
        if let Some(rest) = line.trim().strip_prefix("iopath serve: metrics at http://") {
            addr = rest.trim_end_matches("/metrics").to_owned();
            break;
        }
        line.clear();
    }
    assert!(!addr.is_empty(), "serve did not say where it listens: {line}");
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    (serve, addr)
}

/// The whole answer (head and exposition) to a GET /metrics of `addr`.
fn metrics_of(addr: &str) -> String {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
    let mut b = String::new();
    c.read_to_string(&mut b).unwrap();
    b
}

/// One scrape of `addr`: its status line and how long it took.
/// Waits until serve's probes are attached: its first exposition (published once they are)
/// lists them.
fn wait_attached(addr: &str) {
    wait("serve's probes attached", 30, || metrics_of(addr).contains("iopath_probe_info{"));
}

fn scrape(addr: &str) -> (String, std::time::Duration) {
    let t = std::time::Instant::now();
    let got = metrics_of(addr);
    (got.lines().next().unwrap_or("").to_owned(), t.elapsed())
}

#[test]
fn serve_answers_scrapes_while_idle_and_slow_clients_hold_connections() {
    use std::io::Write;
    require_root();
    let _s = serial();
    // It says where it listens: with port 0, the port the kernel gave it.
    let (mut serve, addr) = serve_on_any_port(&[]);
    assert!(addr.starts_with("127.0.0.1:") && !addr.ends_with(":0"), "no real address printed: {addr}");
    // Ten clients that connect and say nothing, one that sends a byte every 300 ms.
    let idle: Vec<_> = (0..10).map(|_| std::net::TcpStream::connect(&addr).unwrap()).collect();
    let slow_addr = addr.clone();
    let slow = std::thread::spawn(move || {
        let mut c = std::net::TcpStream::connect(&slow_addr).unwrap();
        for b in b"GET /metrics HTTP/1.1\r\n".iter().take(10) {
            if c.write_all(&[*b]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    });
    std::thread::sleep(Duration::from_millis(200));
    for i in 0..5 {
        let (status, took) = scrape(&addr);
        assert_eq!(status, "HTTP/1.1 200 OK", "scrape {i}");
        assert!(took < Duration::from_millis(100), "scrape {i} took {took:?} with 10 idle and 1 slow client");
    }
    // The agent's own cost is among the metrics: each program's runs and CPU time. Its hooks
    // are block I/O's alone, so some I/O makes them run: 4 MiB written and read back direct.
    wait_attached(&addr);
    let f = scratch("serve-self").join("io");
    for args in [
        vec![format!("of={}", f.display()), "if=/dev/zero".into(), "oflag=direct".into()],
        vec![format!("if={}", f.display()), "of=/dev/null".into(), "iflag=direct".into()],
    ] {
        let st = Command::new("dd").args(&args).args(["bs=64k", "count=64", "status=none"]).status().unwrap();
        assert!(st.success(), "dd {args:?}");
    }
    let get = || metrics_of(&addr);
    let runs_in = |body: &str| -> u64 {
        body.lines()
            .filter(|l| l.starts_with("iopath_bpf_runs_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    };
    let mut body = get();
    // A refresh publishes the exposition (--interval 1s).
    let t = Instant::now();
    // The one-hook tier has the kernel time its programs 1 s in every 10: reads go on until a
    // window has seen some.
    while runs_in(&body) == 0 && t.elapsed() < Duration::from_secs(25) {
        let rd = [format!("if={}", f.display()), "of=/dev/null".into(), "iflag=direct".into()];
        assert!(Command::new("dd").args(&rd).args(["bs=64k", "count=16", "status=none"]).status().unwrap().success());
        std::thread::sleep(Duration::from_millis(200));
        body = get();
    }
    let runs = runs_in(&body);
    assert!(runs > 0 && body.contains("iopath_bpf_run_seconds_total{prog="), "no self-metrics: {body}");
    drop(idle);
    slow.join().unwrap();
    unsafe { libc::kill(serve.id() as i32, libc::SIGTERM) };
    assert!(serve.wait().unwrap().success());
}

/// A Kubernetes pod's cgroup as kubelet's cgroupfs driver makes it (here in the host's v1 blkio
/// hierarchy; the rig has v2), with kubelet's pod folder beside it: serve labels the pod's
/// series with its namespace, name, UID, container and QoS class, and counts its I/Os as the
/// workload counted them itself.
#[test]
fn a_pods_series_carry_its_namespace_name_container_and_qos() {
    require_root();
    let _s = serial();
    let uid = "8f3e4a2c-1b2d-4c5e-9f60-7a8b9c0d1e2f";
    let id = "4b825dc642cb6eb9a060e54bf8d69288fbee4904cafebabe0123456789abcdef";
    let base = Path::new("/sys/fs/cgroup/blkio/kubepods");
    let cg = base.join("burstable").join(format!("pod{uid}")).join(id);
    std::fs::create_dir_all(&cg).unwrap();
    let d = scratch("top-pods");
    let pods = d.join("pods");
    std::fs::create_dir_all(pods.join(format!("shop_cart-7d9f_{uid}"))).unwrap();
    let (mut serve, addr) = serve_on_any_port(&["--phases", "--pods-root", pods.to_str().unwrap()]);
    std::thread::sleep(Duration::from_millis(1500));
    let f = d.join("t.dat");
    let out = d.join("run.json");
    let cmd = format!("echo $$ > {}/cgroup.procs && exec \"$0\" run \"$@\"", cg.display());
    let run = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .arg(bin())
        // Alive across refreshes: serve reads a process's cgroup when its I/O first shows.
        .args(["--file", f.to_str().unwrap(), "--size", "16m", "--engine", "psync", "--runtime", "3s"])
        .args(["--json", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let own = finish(run, &out)["ios"].as_u64().unwrap();
    // Two refreshes later the series hold it.
    std::thread::sleep(Duration::from_millis(2500));
    let body = metrics_of(&addr);
    unsafe { libc::kill(serve.id() as i32, libc::SIGTERM) };
    let _ = serve.wait();
    for dir in [cg.clone(), cg.parent().unwrap().to_owned(), base.join("burstable"), base.to_owned()] {
        let _ = std::fs::remove_dir(dir);
    }
    let counted: u64 = body
        .lines()
        .filter(|l| l.starts_with("iopath_ios_total{") && l.contains("pod=\"cart-7d9f\""))
        .inspect(|l| {
            for want in [
                "namespace=\"shop\"",
                &format!("pod_uid=\"{uid}\""),
                &format!("container_id=\"{id}\""),
                "qos=\"burstable\"",
            ] {
                assert!(l.contains(want), "{want} missing: {l}");
            }
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    // The sync route's reads, as the generator counted them, within 1% (top --batch's rule).
    assert!(counted.abs_diff(own) <= own / 100, "serve counted {counted} of the pod's {own} I/Os: {body}");
}

/// The cgroup an I/O is charged to is its bio's (bi_blkg), whichever thread queued it: io_uring
/// reads punted to io-wq workers, and the readahead a buffered read queues, land under the
/// cgroup of the process that asked for them (cgroup v1 blkio here; the flushers' writeback,
/// which v1 charges to the root, is checked under cgroup v2 in the VM rig: tests/vm.rs).
#[test]
fn io_is_charged_to_its_bios_cgroup() {
    require_root();
    let _s = serial();
    let d = scratch("top-bio-cgroup");
    let dev = LoopDev::direct(&d.join("backing"), 256);
    let majmin = std::fs::read_to_string(format!("/sys/block/{}/dev", dev.0.trim_start_matches("/dev/"))).unwrap();
    let cg = Blkio::new("iopath-bio-cg", "blkio.throttle.read_bps_device", &format!("{} 1099511627776", majmin.trim()));
    // A cold file for the buffered read: written direct, so none of it is in the page cache.
    let f = d.join("cold");
    let st = Command::new("dd")
        .args([&format!("of={}", f.display()), "if=/dev/zero", "oflag=direct", "bs=1M", "count=16", "status=none"])
        .status()
        .unwrap();
    assert!(st.success());
    let (mut serve, addr) = serve_on_any_port(&["--phases"]);
    wait_attached(&addr);
    let out = d.join("run.json");
    let g = generator_in(
        &cg,
        &["--engine", "uring", "--force-async", "--qd", "4", "--device", &dev.0, "--ios", "20000"],
        &out,
    );
    let own = finish(g, &out)["ios"].as_f64().unwrap();
    let cmd = format!(
        "echo $$ > {}/cgroup.procs && exec dd if={} of=/dev/null bs=1M status=none",
        cg.0.display(),
        f.display()
    );
    assert!(Command::new("sh").arg("-c").arg(cmd).status().unwrap().success());
    std::thread::sleep(Duration::from_millis(2500));
    let body = metrics_of(&addr);
    unsafe { libc::kill(serve.id() as i32, libc::SIGTERM) };
    let _ = serve.wait();
    let sum = |family: &str, labels: &[&str]| -> f64 {
        body.lines()
            .filter(|l| l.starts_with(family) && labels.iter().all(|w| l.contains(w)))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let mine = "cgroup=\"/iopath-bio-cg\"";
    let iowq = sum("iopath_ios_total{", &[mine, "route=\"iowq\"", "op=\"read\""]);
    assert!((iowq - own).abs() <= own * 0.01, "io-wq reads under the cgroup: {iowq}, the generator did {own}:\n{body}");
    let pc = sum("iopath_io_bytes_total{", &[mine, "route=\"pagecache\"", "op=\"read\""]);
    let want = 16.0 * 1048576.0;
    assert!((0.9 * want..=1.2 * want).contains(&pc), "readahead under the cgroup: {pc} bytes of {want}:\n{body}");
}

/// Always on (the default) attaches no syscall hook; --sync-syscalls brings back the trace's
/// syscall pair, and with it sync I/O's submission and completion.
#[test]
fn sync_syscalls_time_sync_submission_and_the_default_hooks_no_syscall() {
    require_root();
    let _s = serial();
    let d = scratch("top-sync-syscalls");
    let dev = LoopDev::direct(&d.join("backing"), 64);
    let disk = dev.0.trim_start_matches("/dev/").to_owned();
    for (flags, timed) in [(&["--phases"][..], false), (&["--sync-syscalls"][..], true)] {
        let (mut serve, addr) = serve_on_any_port(flags);
        wait_attached(&addr);
        let out = d.join("run.json");
        let own = finish(generator(&["--engine", "psync", "--device", &dev.0, "--ios", "5000"], &out), &out)["ios"]
            .as_f64()
            .unwrap();
        std::thread::sleep(Duration::from_millis(2500));
        let body = metrics_of(&addr);
        unsafe { libc::kill(serve.id() as i32, libc::SIGTERM) };
        let _ = serve.wait();
        let syscalls = body
            .lines()
            .any(|l| l.starts_with("iopath_probe_info{hook=\"raw_syscalls:") && l.contains("attached=\"true\""));
        assert_eq!(syscalls, timed, "{flags:?}: raw_syscalls attached {syscalls}:\n{body}");
        let count = |phase: &str| -> f64 {
            body.lines()
                .filter(|l| {
                    l.starts_with("iopath_io_latency_seconds_count{")
                        && l.contains(&format!("disk=\"{disk}\""))
                        && l.contains("route=\"sync\"")
                        && l.contains(&format!("phase=\"{phase}\""))
                })
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum()
        };
        // The device phase of every read either way; submission only with the syscall hooks
        // (without them it is unknown: no series, never a zero).
        assert!((count("device") - own).abs() <= own * 0.01, "{flags:?}: device {} of {own}:\n{body}", count("device"));
        let sub = count("submission");
        if timed {
            assert!((sub - own).abs() <= own * 0.01, "{flags:?}: submission {sub} of {own}");
        } else {
            assert_eq!(sub, 0.0, "{flags:?}: submission timed without a syscall hook:\n{body}");
        }
    }
}

/// The one-hook tier, serve's default: on two loop devices at once, one whose queue keeps stats
/// (scheduler none: wbt on, io_start_time_ns set) and one on bfq (wbt off: no stats, the stamp
/// 0), every read request counted on its disk as the disk's own statistics count it; the first
/// device's stamps trusted, the second's issue stamp judged untrusted and that device timed by the
/// issue hook instead; either device's mean device phase within max(1 us, 2%) of a bpftrace
/// two-probe tracer's (block_rq_issue -> block_rq_complete) on the same run; no submission or
/// completion series (not measured, never a zero); and when serve ends, no program of it left.
#[test]
fn serve_times_block_and_device_from_checked_stamps_with_one_hook() {
    require_root();
    let _s = serial();
    let d = scratch("top-one-hook");
    let (a, b) = (LoopDev::direct(&d.join("a"), 128), LoopDev::direct(&d.join("b"), 128));
    set_scheduler(&b.0, "bfq");
    let name = |l: &LoopDev| l.0.trim_start_matches("/dev/").to_owned();
    let devt = |l: &LoopDev| -> u64 {
        let mm = std::fs::read_to_string(format!("/sys/block/{}/dev", name(l))).unwrap();
        let (ma, mi) = mm.trim().split_once(':').unwrap();
        (ma.parse::<u64>().unwrap() << 20) | mi.parse::<u64>().unwrap()
    };
    let stamps_progs = || sh("bpftool", &["prog", "show"]).lines().filter(|l| l.contains("name stamps_")).count();
    assert_eq!(stamps_progs(), 0, "a one-hook program of another run is loaded");
    let (mut serve, addr) = serve_on_any_port(&[]);
    wait_attached(&addr);
    let (da, db) = (devt(&a), devt(&b));
    // A first run decides each device's stamps (a check window); the measured run comes after,
    // on the stamps where trusted and on the hooks elsewhere.
    let warm = |l: &LoopDev| iopath(&["run", "--engine", "uring", "--qd", "8", "--device", &l.0, "--ios", "5000"]);
    assert!(warm(&a).status.success() && warm(&b).status.success());
    wait("both devices' stamps judged", 15, || {
        let m = metrics_of(&addr);
        [&a, &b]
            .iter()
            .all(|l| m.contains(&format!("iopath_stamps_trusted{{disk=\"{}\",stamp=\"io_start_time_ns\"}}", name(l))))
    });
    let before = metrics_of(&addr);
    // The kernel's own count of each disk's completed read requests and merged reads.
    let stat = |l: &LoopDev| -> (u64, u64) {
        let s = std::fs::read_to_string(format!("/sys/block/{}/stat", name(l))).unwrap();
        let f: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
        (f[0], f[1])
    };
    let stat_before = [stat(&a), stat(&b)];
    let bt = BpfTrace::start(&format!(
        "tracepoint:block:block_rq_issue /args->dev == {da} || args->dev == {db}/ {{ @s[args->dev, args->sector] = nsecs; }}
         tracepoint:block:block_rq_complete /@s[args->dev, args->sector]/ {{
           $t = nsecs - @s[args->dev, args->sector];
           if (args->dev == {da}) {{ @na = count(); @ta = sum($t); }} else {{ @nb = count(); @tb = sum($t); }}
           delete(@s[args->dev, args->sector]); }}"
    ));
    // bpftrace says "Attaching" before its probes are on: the run starts once they are.
    std::thread::sleep(Duration::from_secs(1));
    let (oa, ob) = (d.join("a.json"), d.join("b.json"));
    let ga = generator(&["--engine", "uring", "--qd", "8", "--device", &a.0, "--ios", "60000"], &oa);
    let gb = generator(&["--engine", "uring", "--qd", "8", "--device", &b.0, "--ios", "60000"], &ob);
    let (ra, rb) = (finish(ga, &oa), finish(gb, &ob));
    let peer = bt.stop();
    let stat_after = [stat(&a), stat(&b)];
    // Two refreshes after the last I/O.
    std::thread::sleep(Duration::from_millis(2500));
    let m = metrics_of(&addr);
    // SAFETY: kill with a pid we spawned.
    unsafe { libc::kill(serve.id() as i32, libc::SIGTERM) };
    assert!(serve.wait().unwrap().success());
    // The kernel frees a program after its last fd closes, from a deferred work item.
    wait("serve's programs unloaded", 10, || stamps_progs() == 0);
    set_scheduler(&b.0, "none");

    let value = |l: &str| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap();
    // The measured run's part: the scrape after it less the one before it.
    let sum = |prefix: &str, has: &[&str]| -> f64 {
        let of = |m: &str| -> f64 {
            m.lines().filter(|l| l.starts_with(prefix) && has.iter().all(|h| l.contains(h))).map(value).sum()
        };
        of(&m) - if prefix.starts_with("iopath_stamps") { 0.0 } else { of(&before) }
    };
    let lost = |why: &str| sum("iopath_lost_events_total{", &[&format!("reason=\"{why}\"")]);
    let unknown = lost("device not checked yet (phases unknown)") + lost("no hooked time (phases unknown)");
    assert!(!m.contains("phase=\"submission\"") && !m.contains("phase=\"completion\""), "{m}");
    let mut offsets = Vec::new();
    for (i, (l, r, n_peer, t_peer, trusted)) in
        [(&a, &ra, "na", "ta", 1.0), (&b, &rb, "nb", "tb", 0.0)].into_iter().enumerate()
    {
        let disk = format!("disk=\"{}\"", name(l));
        // One hook sees requests: adjacent reads the block layer merged are one (the kernel's
        // merged count), every request counted as the disk's own statistics count it.
        let (reqs, merged) = (stat_after[i].0 - stat_before[i].0, stat_after[i].1 - stat_before[i].1);
        assert_eq!(r["ios"].as_u64().unwrap(), reqs + merged, "{disk}: the generator's reads");
        let own = reqs as f64;
        let ios = sum("iopath_ios_total{", &[&disk, "route=\"direct\"", "op=\"read\""]);
        // Within 0.05%: with I/O on another disk at the same time (the harness's own files on
        // vda), this 6.18 host delivered ~1 in 10^4 block_rq_complete calls to no BPF program,
        // iopath's and a bpftrace counter's alike (59996 both, the disk 60000), no miss counted.
        assert!(
            ios <= own && own - ios <= own * 0.0005,
            "{disk}: serve counted {ios} read requests, the disk {own} ({merged} merged)"
        );
        let stamp = sum("iopath_stamps_trusted{", &[&disk, "stamp=\"io_start_time_ns\""]);
        assert_eq!(stamp, trusted, "{disk}: the issue stamp's verdict:\n{m}");
        let n = sum("iopath_io_latency_seconds_count{", &[&disk, "phase=\"device\""]);
        let t = sum("iopath_io_latency_seconds_sum{", &[&disk, "phase=\"device\""]);
        // Every one timed (the devices were judged before), or counted unknown: never lost silently.
        assert!(n <= own && n + unknown >= own && n >= own * 0.99, "{disk}: {n} timed + {unknown} unknown of {own}");
        let mean = t / n * 1e9;
        let peer_mean = peer[t_peer] / peer[n_peer];
        eprintln!("{disk}: device phase mean {mean:.0} ns over {n}, bpftrace {peer_mean:.0} ns over {}", peer[n_peer]);
        // The two tracers' programs run one after the other on each tracepoint, so their clocks
        // differ by a program's run at each end: 40-230 ns on this host on a quiet day, 0.85-1.54
        // us (2.0-4.2%, ours always the longer) on a day its device phases ran 28-70 us — on the
        // hooked device as on the stamped one, so between the tracers, not in the stamps (that
        // is checked next, tighter). max(5%, 2 us) here.
        assert!(
            (mean - peer_mean).abs() <= (peer_mean * 0.05).max(2000.0),
            "{disk}: device phase mean {mean:.0} ns, bpftrace's {peer_mean:.0} ns over {} requests",
            peer[n_peer]
        );
        offsets.push((mean - peer_mean, peer_mean));
    }
    // The stamps add no error of their own: the stamped disk's offset from the peer is its hooked
    // twin's within max(500 ns, 1%) (120-290 ns apart in five runs).
    let ((stamped, phase), (hooked, _)) = (offsets[0], offsets[1]);
    assert!(
        (stamped - hooked).abs() <= 500f64.max(0.01 * phase),
        "offsets from bpftrace: stamped {stamped:.0} ns, hooked {hooked:.0} ns"
    );
}

/// `serve --phases-every 4s --phases-for 2s`: beside the one hook, the full set attached for 2 s
/// of every 4 — its programs in the kernel during a window and gone after, no program of serve's
/// left once it ends (bpftool's count back where it was) — and its windows' series apart
/// (window="phases"), with the submission and completion the one hook does not measure.
#[test]
fn serve_duty_cycles_the_full_set_beside_the_one_hook() {
    require_root();
    let _s = serial();
    let d = scratch("top-duty");
    let dev = LoopDev::direct(&d.join("backing"), 128);
    let disk = format!("disk=\"{}\"", dev.0.trim_start_matches("/dev/"));
    let progs = || sh("bpftool", &["prog", "show"]).lines().filter(|l| l.contains(" name ")).count();
    let window_progs =
        || sh("bpftool", &["prog", "show"]).lines().filter(|l| l.contains("name uring_complete")).count();
    let before = progs();
    let (mut serve, addr) = serve_on_any_port(&["--phases-every", "4s", "--phases-for", "2s"]);
    wait_attached(&addr);
    let out = d.join("run.json");
    let g = generator(&["--engine", "uring", "--qd", "8", "--device", &dev.0, "--runtime", "9s"], &out);
    let (mut during, mut between) = (false, false);
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(8) {
        if window_progs() > 0 {
            during = true;
        } else {
            between = true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    finish(g, &out);
    // The window after the run, published.
    std::thread::sleep(Duration::from_secs(5));
    let m = metrics_of(&addr);
    // SAFETY: kill with a pid we spawned.
    unsafe { libc::kill(serve.id() as i32, libc::SIGTERM) };
    assert!(serve.wait().unwrap().success());
    wait("serve's programs unloaded", 10, || progs() == before);
    assert!(during && between, "the full set's programs attached in windows only (during {during}, between {between})");
    let value = |l: &str| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap();
    let sum = |prefix: &str, has: &[&str]| -> f64 {
        m.lines().filter(|l| l.starts_with(prefix) && has.iter().all(|h| l.contains(h))).map(value).sum()
    };
    for phase in ["submission", "completion"] {
        let p = format!("phase=\"{phase}\"");
        let n = sum("iopath_io_latency_seconds_count{", &[&disk, "route=\"uring\"", "window=\"phases\"", &p]);
        assert!(n > 0.0, "no {phase} in the windows:\n{m}");
        // The one hook's own series never have it.
        assert!(
            m.lines().filter(|l| l.contains(&p)).all(|l| l.contains("window=\"phases\"")),
            "a {phase} series outside the windows:\n{m}"
        );
    }
    // The one hook's series of the disk: every request, the windows' a part of them.
    let all = sum("iopath_ios_total{", &[&disk, "route=\"direct\""]);
    let windowed = sum("iopath_ios_total{", &[&disk, "window=\"phases\""]);
    assert!(windowed > 0.0 && windowed < all, "windows {windowed} of {all} I/Os");
    assert!(sum("iopath_phases_windows_total", &[]) >= 2.0, "{m}");
    assert_eq!(sum("iopath_phases_duty ", &[]), 0.5, "{m}");
    assert!(sum("iopath_phases_window_bpf_ns_per_io ", &[]) > 0.0, "{m}");
}

/// More keys than the one hook's row slots (16 a CPU, two probes a key): 40 io cgroups reading
/// one disk make 40 rows, and the keys whose two slots were taken spill into the per-CPU hash
/// (bpftool shows it used). Every request is counted once, under its own cgroup, as the disk's
/// own statistics count them.
#[test]
fn one_hook_rows_beyond_the_slots_spill_and_count_every_request() {
    require_root();
    let _s = serial();
    let d = scratch("top-one-hook-spill");
    let l = LoopDev::direct(&d.join("a"), 64);
    let name = l.0.trim_start_matches("/dev/").to_owned();
    let majmin = std::fs::read_to_string(format!("/sys/block/{name}/dev")).unwrap();
    let cgs: Vec<Blkio> = (0..40)
        .map(|i| {
            Blkio::new(
                &format!("iopath-spill-{i}"),
                "blkio.throttle.read_bps_device",
                &format!("{} 1099511627776", majmin.trim()),
            )
        })
        .collect();
    let stat = || -> (u64, u64) {
        let s = std::fs::read_to_string(format!("/sys/block/{name}/stat")).unwrap();
        let f: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
        (f[0], f[1])
    };
    let (mut serve, addr) = serve_on_any_port(&["--cgroups", "100"]);
    wait_attached(&addr);
    let before = metrics_of(&addr);
    let s0 = stat();
    for cg in &cgs {
        let o = cg.iopath(&["run", "--engine", "psync", "--device", &l.0, "--ios", "300"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let s1 = stat();
    std::thread::sleep(Duration::from_millis(2500));
    let m = metrics_of(&addr);
    let spilled = sh("bpftool", &["map", "dump", "name", "stamps_spill"]).matches("\"key\"").count();
    // SAFETY: kill with a pid we spawned.
    unsafe { libc::kill(serve.id() as i32, libc::SIGTERM) };
    assert!(serve.wait().unwrap().success());

    let (reqs, merged) = (s1.0 - s0.0, s1.1 - s0.1);
    assert_eq!((reqs, merged), (40 * 300, 0), "one request a read at QD1");
    assert!(spilled > 0, "40 keys in 16 slots a CPU: some spill into the hash");
    let value = |l: &str| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap();
    let ios = |m: &str, has: &str| -> f64 {
        m.lines()
            .filter(|x| {
                x.starts_with("iopath_ios_total{") && x.contains(&format!("disk=\"{name}\"")) && x.contains(has)
            })
            .map(value)
            .sum()
    };
    let mut total = 0.0;
    for i in 0..40 {
        let cg = format!("cgroup=\"/iopath-spill-{i}\"");
        let n = ios(&m, &cg) - ios(&before, &cg);
        // ~1 in 10^4 completions reach no program on this kernel under concurrent I/O (see
        // serve_times_block_and_device_from_checked_stamps_with_one_hook): one may be missing.
        assert!((299.0..=300.0).contains(&n), "{cg}: serve counted {n} reads of 300:\n{m}");
        total += n;
    }
    assert!(total <= reqs as f64 && reqs as f64 - total <= reqs as f64 * 0.0005, "{total} of {reqs}");
}
