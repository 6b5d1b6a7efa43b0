//! iopath as root on a host other users share: what a hostile or careless local user can do to
//! its outputs, its target, its terminal and its exposition, and that every way a trace ends
//! ends the traced command's tree. Each case asserts the exit status, the message and that
//! nothing outside iopath's own outputs changed (checksums of the planted files).

mod common;
use common::*;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A file's bytes and mode: what "unchanged" means here.
fn fingerprint(p: &Path) -> (Vec<u8>, u32) {
    let m = std::fs::symlink_metadata(p).unwrap();
    let bytes = if m.file_type().is_symlink() {
        std::fs::read_link(p).unwrap().into_os_string().into_encoded_bytes()
    } else {
        std::fs::read(p).unwrap()
    };
    (bytes, m.mode())
}

/// A folder anyone may write (1777, as /tmp), with a root-only victim file outside it.
fn shared(name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let d = scratch(name);
    let sh = d.join("shared");
    std::fs::create_dir(&sh).unwrap();
    std::fs::set_permissions(&sh, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = d.join("victim");
    std::fs::write(&victim, b"root's own data\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    (d, sh, victim)
}

/// `cmd` run as nobody (uid 65534).
fn as_nobody(cmd: &str) {
    let st = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", cmd])
        .status()
        .unwrap();
    assert!(st.success(), "as nobody: {cmd}");
}

/// Files whose name says they are iopath's temporaries.
fn temps(d: &Path) -> Vec<String> {
    std::fs::read_dir(d)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".iopath-") && n.ends_with(".tmp"))
        .collect()
}

/// `iopath trace` of the generator on `t` (4 MiB, made by iopath if missing) for `ios` I/Os,
/// with `more` flags: the invocation every output case here shares.
fn trace_of(t: &Path, ios: &str, more: &[&str]) -> std::process::Output {
    let mut a = vec!["trace", "--file", t.to_str().unwrap(), "--size", "4m", "--ios", ios];
    a.extend_from_slice(more);
    iopath(&a)
}

#[test]
fn planted_symlinks_never_redirect_an_output() {
    require_root();
    let (d, sh_dir, victim) = shared("sec-symlinks");
    let before = fingerprint(&victim);
    // A hostile user plants links at every name the old scheme used for the next 400 pids,
    // and at the final names' old temporary names.
    let me = std::process::id();
    let v = victim.display();
    let s = sh_dir.display();
    as_nobody(&format!(
        "for p in $(seq {me} $(({me} + 400))); do for n in r.json e.ev; do ln -s {v} {s}/.$n.iopath-$p.tmp; done; done"
    ));
    let planted = std::fs::read_dir(&sh_dir).unwrap().count();
    // A stale temporary of a SIGKILLed run (pid gone, root's own file) is cleaned; one of the
    // same shape owned by another user is left alone.
    let stale = sh_dir.join(".r.json.iopath-4000000-0123456789abcdef.tmp");
    std::fs::write(&stale, b"partial").unwrap();
    let theirs = sh_dir.join(".e.ev.iopath-4000001-0123456789abcdef.tmp");
    as_nobody(&format!("echo mine > {}", theirs.display()));
    // An existing output keeps its mode.
    let json = sh_dir.join("r.json");
    std::fs::write(&json, b"{}").unwrap();
    std::fs::set_permissions(&json, std::fs::Permissions::from_mode(0o640)).unwrap();
    let t = d.join("t.dat");
    let ev_path = sh_dir.join("e.ev");
    let out = trace_of(&t, "2000", &["--json", json.to_str().unwrap(), "--events-out", ev_path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(fingerprint(&victim), before, "the victim changed: an output followed a planted link");
    let rep: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).expect("the report in r.json");
    assert!(rep["ios"].as_u64().unwrap() >= 2000, "{rep}");
    assert_eq!(std::fs::metadata(&json).unwrap().mode() & 0o7777, 0o640, "r.json lost its mode");
    let ev = std::fs::read(sh_dir.join("e.ev")).unwrap();
    assert!(ev.starts_with(b"iopath.events/3"), "the events file is iopath's");
    assert!(!stale.exists(), "a dead run's temporary file was left");
    assert_eq!(std::fs::read(&theirs).unwrap(), b"mine\n", "another user's file was touched");
    // Nothing of iopath's own is left: the planted links, their file and the outputs only.
    let left = std::fs::read_dir(&sh_dir).unwrap().count();
    assert_eq!(left, planted + 1 + 2, "left in the folder: {:?}", temps(&sh_dir));
}

#[test]
fn no_output_replaces_an_input_or_a_users_file() {
    require_root();
    let (d, sh_dir, _) = shared("sec-inputs");
    let t = d.join("t.dat");
    // --perfetto X.pf never touches X.events.tmp (it had been deleted, whatever it was).
    let user = sh_dir.join("p.events.tmp");
    as_nobody(&format!("echo the user job > {}", user.display()));
    let before = fingerprint(&user);
    let pf = sh_dir.join("p.pf");
    let out = trace_of(&t, "500", &["--perfetto", pf.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(fingerprint(&user), before);
    assert!(std::fs::metadata(&pf).unwrap().len() > 0);
    assert!(temps(&sh_dir).is_empty(), "{:?}", temps(&sh_dir));
    // A file or a link another user planted at the final name: refused before the run, left as
    // it was (replacing it would hand them a report they chose the place and mode of).
    for (name, plant) in [("theirs.json", "echo theirs > {}"), ("link.json", "ln -s /etc/passwd {}")] {
        let p = sh_dir.join(name);
        as_nobody(&plant.replace("{}", &p.display().to_string()));
        let before = fingerprint(&p);
        let e = fails(&["run", "--file", t.to_str().unwrap(), "--ios", "10", "--json", p.to_str().unwrap()]);
        assert!(e.contains("belongs to uid 65534") && e.contains("never replaces a file someone else owns"), "{e}");
        assert_eq!(fingerprint(&p), before);
    }
    // An --out folder someone else controls: a link they planted, or a folder anyone may write
    // that is theirs. Refused before the run; nothing written where either points.
    let elsewhere = d.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let out_link = sh_dir.join("out-link");
    as_nobody(&format!("ln -s {} {}", elsewhere.display(), out_link.display()));
    let out_open = sh_dir.join("out-open");
    as_nobody(&format!("mkdir -m 0777 {}", out_open.display()));
    for o in [&out_link, &out_open] {
        let e = fails(&["trace", "--file", t.to_str().unwrap(), "--ios", "10", "--out", o.to_str().unwrap()]);
        assert!(e.contains("someone else decides what is in it"), "{e}");
    }
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    assert_eq!(std::fs::read_dir(&out_open).unwrap().count(), 0);
    // flamegraph --diff into the folder of its own input: refused before any work.
    let fd = d.join("flame");
    std::fs::create_dir(&fd).unwrap();
    let a = fd.join("diff.folded");
    std::fs::write(&a, "main;read 10\nmain;write 5\n").unwrap();
    let b = d.join("after.folded");
    std::fs::write(&b, "main;read 12\n").unwrap();
    let fa = fingerprint(&a);
    let e = fails(&["flamegraph", "--diff", a.to_str().unwrap(), b.to_str().unwrap(), "--out", fd.to_str().unwrap()]);
    assert!(e.contains("that is the 'before' input"), "{e}");
    assert_eq!(fingerprint(&a), fa);
    // compare --json onto one of its inputs, by a hard link: refused.
    let link = d.join("link.json");
    std::fs::hard_link(&a, &link).unwrap();
    let e = fails(&["compare", a.to_str().unwrap(), b.to_str().unwrap(), "--json", link.to_str().unwrap()]);
    assert!(e.contains("input"), "{e}");
    assert_eq!(fingerprint(&a), fa);
}

#[test]
fn the_generator_writes_only_files_it_created() {
    require_root();
    let d = scratch("sec-generator");
    let user = d.join("user.dat");
    std::fs::write(&user, vec![7u8; 1 << 20]).unwrap();
    let before = fingerprint(&user);
    let e = fails(&["run", "--file", user.to_str().unwrap(), "--rw", "randwrite", "--ios", "10"]);
    assert!(e.contains("iopath did not create it") && e.contains("--allow-write"), "{e}");
    // A read job never grows a file it did not create, nor touches its last bytes.
    let small = d.join("small.dat");
    std::fs::write(&small, b"twenty-one bytes here").unwrap();
    let s_before = fingerprint(&small);
    let e = fails(&["run", "--file", small.to_str().unwrap(), "--size", "64k", "--ios", "10"]);
    assert!(e.contains("never grows or changes a file it did not"), "{e}");
    let e = fails(&["run", "--file", user.to_str().unwrap(), "--size", "2m", "--ios", "10"]);
    assert!(e.contains("holds 1M") && e.contains("--size 1M or less"), "{e}");
    // Reading within it is fine, and changes nothing.
    let r = run_json(&["--file", user.to_str().unwrap(), "--ios", "100"]);
    assert_eq!(r["ios"], 100);
    assert_eq!(fingerprint(&user), before);
    assert_eq!(fingerprint(&small), s_before);
    // The loop device's backing file: never, even with --allow-write.
    let l = LoopDev::new(&d.join("backing.img"), 16, 512);
    let img = d.join("backing.img");
    let i_before = fingerprint(&img);
    let e = fails(&["run", "--file", img.to_str().unwrap(), "--rw", "randwrite", "--allow-write", "--ios", "10"]);
    assert!(e.contains("backing file of /dev/loop"), "{e}");
    assert_eq!(fingerprint(&img), i_before);
    drop(l);
    // --allow-write names an existing file the job may write.
    let w = run_json(&["--file", user.to_str().unwrap(), "--rw", "randwrite", "--allow-write", "--ios", "100"]);
    assert_eq!(w["writes"], 100);
    // A file iopath created is its own to write again, and to grow.
    let own = d.join("own.dat");
    run_json(&["--file", own.to_str().unwrap(), "--size", "1m", "--ios", "10"]);
    let w = run_json(&["--file", own.to_str().unwrap(), "--size", "2m", "--rw", "randwrite", "--ios", "100"]);
    assert_eq!(w["writes"], 100);
    assert_eq!(std::fs::metadata(&own).unwrap().len(), 2 << 20);
    // A link planted where the target will be created: refused, the link's target untouched.
    let victim = d.join("victim");
    std::fs::write(&victim, b"x").unwrap();
    let planted = d.join("planted.dat");
    std::os::unix::fs::symlink(d.join("nowhere"), &planted).unwrap();
    let e = fails(&["run", "--file", planted.to_str().unwrap(), "--ios", "10"]);
    assert!(e.contains("symbolic link"), "{e}");
    assert!(!d.join("nowhere").exists());
}

/// Processes whose command line holds `marker`.
fn with_marker(marker: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if let Ok(c) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            if String::from_utf8_lossy(&c).contains(marker) {
                v.push(pid);
            }
        }
    }
    v
}

#[test]
fn every_end_of_a_trace_ends_the_commands_whole_tree() {
    require_root();
    // A command whose children ignore SIGINT and SIGTERM, and one that leaves a daemon behind.
    for (how, marker, extra) in [
        ("--duration", "301.25", vec!["--duration", "2s"]),
        ("SIGTERM", "301.50", vec![]),
        ("SIGINT", "301.60", vec![]),
        ("command exit", "301.75", vec![]),
    ] {
        let script = if how == "command exit" {
            format!("(trap '' TERM INT HUP; exec sleep {marker}) & sleep 1")
        } else {
            format!("trap '' TERM INT; (trap '' TERM INT; exec sleep {marker}) & sleep {marker}")
        };
        let mut args = vec!["trace"];
        args.extend(extra.iter().copied());
        args.extend(["--", "sh", "-c", script.as_str()]);
        let mut c = Command::new(bin()).args(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        if how.starts_with("SIG") {
            wait("the command's tree to start", 30, || with_marker(marker).len() >= 2);
            let sig = if how == "SIGTERM" { libc::SIGTERM } else { libc::SIGINT };
            // SAFETY: signalling our own child.
            unsafe { libc::kill(c.id() as i32, sig) };
        }
        let t = std::time::Instant::now();
        let st = c.wait().unwrap();
        // The report (stdout) and the messages (stderr): small, read after the exit.
        let mut err = String::new();
        std::io::Read::read_to_string(c.stdout.as_mut().unwrap(), &mut err).unwrap();
        std::io::Read::read_to_string(c.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert!(t.elapsed().as_secs() < 60, "{how}: iopath waited for the tree: {err}");
        std::thread::sleep(std::time::Duration::from_millis(300));
        let left = with_marker(marker);
        for &p in &left {
            // SAFETY: cleaning up after a failed case.
            unsafe { libc::kill(p as i32, libc::SIGKILL) };
        }
        assert!(left.is_empty(), "{how}: {} of the command's processes outlived the trace ({st}): {err}", left.len());
        assert!(err.contains("iopath killed them"), "{how}: the report does not say what it ended: {err}");
    }
}

#[test]
fn a_fifo_with_no_writer_is_ended_by_sigint() {
    require_root();
    let d = scratch("sec-fifo");
    let fifo = d.join("in.json");
    sh("mkfifo", &[fifo.to_str().unwrap()]);
    for args in [
        vec!["compare", fifo.to_str().unwrap(), fifo.to_str().unwrap()],
        vec!["report", "--events", fifo.to_str().unwrap()],
    ] {
        let mut c = Command::new(bin()).args(&args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(500));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
        let t = std::time::Instant::now();
        let st = loop {
            if let Some(st) = c.try_wait().unwrap() {
                break st;
            }
            if t.elapsed().as_secs() > 5 {
                let _ = c.kill();
                panic!("{args:?} still waits on the FIFO 5 s after SIGINT");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(st.signal(), Some(libc::SIGINT), "{args:?}: ended by the signal itself (a shell's 130): {st}");
    }
}

#[test]
fn a_full_file_system_fails_the_output_not_the_report() {
    require_root();
    let d = scratch("sec-enospc");
    let m = Mount::new(&["-t", "tmpfs", "-o", "size=64k", "tmpfs"], &d.join("tiny"));
    let t = d.join("t.dat");
    for (flag, name) in [("--events-out", "e.ev"), ("--perfetto", "p.pf")] {
        let dest = m.0.join(name);
        let out = trace_of(&t, "20000", &[flag, dest.to_str().unwrap()]);
        let (o, e) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{flag}: {e}");
        assert!(o.contains("phases (us)"), "{flag}: the report was lost: {o}");
        assert!(
            e.contains("ENOSPC") && e.contains("records received") && e.contains("had reached the disk"),
            "{flag}: {e}"
        );
        assert_eq!(e.matches("ENOSPC").count(), 1, "{flag}: said once: {e}");
        assert_eq!(std::fs::read_dir(&m.0).unwrap().count(), 0, "{flag}: a partial file was left");
    }
}

/// A copy of iopath under a hostile name: its comm is the name's first 15 bytes.
fn hostile_binary(d: &Path) -> PathBuf {
    let p = d.join("x\u{1b}[2J\u{1b}[31m\n<b>");
    std::fs::copy(bin(), &p).unwrap();
    p
}

#[test]
fn hostile_names_reach_no_terminal_table_or_exposition_raw() {
    require_root();
    let d = scratch("sec-names");
    let t = d.join("t.dat");
    run_json(&["--file", t.to_str().unwrap(), "--size", "4m", "--ios", "10"]);
    let vda = std::fs::read_to_string("/sys/block/vda/dev").unwrap();
    let cg = Blkio::new("x,a=\"b\"\\c\td", "blkio.throttle.read_iops_device", &format!("{} 1000000", vda.trim()));
    let gen = hostile_binary(&d);
    let cmd = format!(
        "echo $$ > '{}/cgroup.procs' && exec \"$0\" run --file {} --size 4m --runtime 25s --qd 1",
        cg.0.display(),
        t.display()
    );
    let mut g =
        Command::new("sh").args(["-c", &cmd]).arg(&gen).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    // top --batch: no control character of theirs reaches the terminal, and no row is forged.
    let out = iopath(&["top", "--phases", "--batch", "--count", "3", "--interval", "1s"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "a control character reached the terminal: {text:?}");
    assert!(text.contains("x\\x1b[2J"), "the hostile comm, made visible, is its row's: {text}");
    assert!(!text.lines().any(|l| l.starts_with("<b>")), "a newline forged a row: {text}");
    // serve: the exposition stays valid for Prometheus's own parser, labels escaped.
    let mut serve = Command::new(bin())
        .args(["serve", "--phases", "--listen", "127.0.0.1:19477", "--interval", "1s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let get = |verb: &str| -> String {
        use std::io::{Read, Write};
        let Ok(mut c) = std::net::TcpStream::connect("127.0.0.1:19477") else { return String::new() };
        let _ = c.write_all(format!("{verb} /metrics HTTP/1.1\r\n\r\n").as_bytes());
        let mut b = String::new();
        let _ = c.read_to_string(&mut b);
        b
    };
    wait("serve's rows of the hostile cgroup", 60, || get("GET").contains("iopath_ios_total{disk="));
    let m = get("GET");
    let _ = serve.kill();
    let _ = serve.wait();
    let _ = g.kill();
    let _ = g.wait();
    let head = get("HEAD");
    assert!(head.is_empty() || head.starts_with("HTTP/1.1 200"), "HEAD /metrics: {head}");
    let body = m.split_once("\r\n\r\n").map(|x| x.1).unwrap_or("").to_owned();
    assert!(body.contains(r#"cgroup="/x,a=\"b\"\\\\c\\x09d""#), "the cgroup label is not escaped as expected: {body}");
    // promtool reads the Prometheus text format, which has no OpenMetrics `info` type: the one
    // family of that type (iopath_probe, hook names iopath writes itself) and `# EOF` are left
    // out; every family with a hostile label is checked.
    let text: String =
        body.lines().filter(|l| !l.contains("iopath_probe") && *l != "# EOF").map(|l| format!("{l}\n")).collect();
    let file = d.join("scrape.txt");
    std::fs::write(&file, &text).unwrap();
    let check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&file).unwrap())
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&check.stdout), String::from_utf8_lossy(&check.stderr));
    assert!(
        !said.contains("error while linting") && !said.contains("parse"),
        "promtool rejects the exposition: {said}"
    );
}

#[test]
fn the_report_page_escapes_a_hostile_file_name() {
    require_root();
    let d = scratch("sec-html");
    let t = d.join("<img src=x onerror=alert(1)>.dat");
    let out = d.join("out");
    let o = trace_of(&t, "200", &["--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("onerror=alert(1)&gt;") || html.contains("&lt;img"), "the name is not on the page escaped");
    assert!(!html.contains("<img src=x"), "the file name reached the page as markup");
}

/// top names a process for what it runs now: one that did I/O as `python3` and then exec'd the
/// generator is `iopath` from then on (the gate's `sh` had named a traced command for good).
#[test]
fn top_names_a_process_for_what_it_runs_now() {
    require_root();
    let d = scratch("sec-exec");
    let t = d.join("t.dat");
    run_json(&["--file", t.to_str().unwrap(), "--size", "4m", "--ios", "10"]);
    let py = format!(
        "import os, mmap, time\n\
         fd = os.open({t:?}, os.O_RDONLY | os.O_DIRECT)\n\
         buf = mmap.mmap(-1, 4096)\n\
         end = time.time() + 5\n\
         while time.time() < end: os.preadv(fd, [buf], 0)\n\
         os.execv({b:?}, [{b:?}, 'run', '--file', {t:?}, '--runtime', '6s', '--qd', '1'])\n",
        t = t.to_str().unwrap(),
        b = bin()
    );
    let mut p = Command::new("python3").args(["-c", &py]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let out = iopath(&["top", "--phases", "--batch", "--count", "9", "--interval", "1s"]);
    let _ = p.wait();
    let text = String::from_utf8_lossy(&out.stdout);
    let pid = p.id().to_string();
    let names: Vec<&str> = text
        .lines()
        .filter(|l| l.split_whitespace().next() == Some(pid.as_str()))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(names.last(), Some(&"iopath"), "the process is named for what it ran last: {names:?}\n{text}");
}

fn wait(what: &str, secs: u64, mut ok: impl FnMut() -> bool) {
    let t = std::time::Instant::now();
    while !ok() {
        assert!(t.elapsed().as_secs() < secs, "timed out waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}
