//! Real applications traced end to end on an ext4 of our own: SQLite inserting with
//! synchronous=FULL under `iopath trace -- sqlite3`, and PostgreSQL from Debian's packages under
//! `iopath trace --pid` while pgbench runs. Each is checked against what iopath does not compute:
//! a bpftrace script timing the same syscalls on the same run, and the application's own counts.

mod common;
use common::*;
use serde_json::Value;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn mean(s: &Value) -> f64 {
    s["mean_ns"].as_f64().unwrap()
}

/// Our count and mean of the sync calls against bpftrace's on the same calls: entry and exit
/// tracepoints both, so only the probes' own cost apart (a few us).
fn matches_reference(sc: &Value, reference: &std::collections::HashMap<String, f64>, slack_calls: f64, what: &str) {
    let (n, t) = (reference["n"], reference["t"]);
    let ours = sc["fsync"].as_f64().unwrap() + sc["fdatasync"].as_f64().unwrap();
    assert!((ours - n).abs() <= slack_calls, "{what}: {ours} sync calls, bpftrace saw {n}");
    let (ours_mean, theirs) = (mean(&sc["split"]["total"]), t / n);
    assert!(
        (ours_mean - theirs).abs() <= theirs * 0.05 + 3000.0,
        "{what}: sync call mean {ours_mean} ns, bpftrace {theirs} ns"
    );
}

/// SQLite's rollback journal with synchronous=FULL: every INSERT is a transaction that syncs the
/// journal twice, its directory once (the journal was just created) and the database once. All
/// of them are followed, the directory's too, and each call's time is split.
#[test]
fn sqlite_inserts_with_synchronous_full() {
    require_root();
    let (l, _m, f) = cold_fs("sqlite", 8);
    let db = Path::new(&f).with_file_name("t.db");
    let mut sql = "PRAGMA synchronous=FULL; CREATE TABLE t(a INTEGER, b TEXT);".to_owned();
    for i in 0..200 {
        sql += &format!("INSERT INTO t VALUES({i}, 'row {i}');");
    }
    // The reference: bpftrace times sqlite3's fdatasyncs, counts those on a directory (the fd's
    // inode mode) and its pwrite64 calls.
    let bt = BpfTrace::start(
        "tracepoint:syscalls:sys_enter_fdatasync /comm == \"sqlite3\"/ {
           @s[tid] = nsecs;
           $f = *(curtask->files->fdt->fd + args->fd);
           if (($f->f_inode->i_mode & 0xf000) == 0x4000) { @dirs = count(); } }
         tracepoint:syscalls:sys_exit_fdatasync /@s[tid]/ { @n = count(); @t = sum(nsecs - @s[tid]); delete(@s[tid]); }
         tracepoint:syscalls:sys_enter_pwrite64 /comm == \"sqlite3\"/ { @w = count(); }",
    );
    let before = disk_stat(&l.0);
    let out = iopath(&["trace", "--json", "-", "--", "sqlite3", db.to_str().unwrap(), &sql]);
    let dev = delta(before, disk_stat(&l.0));
    let reference = bt.stop();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sc = &r["sync_calls"];
    // 201 transactions (the CREATE and 200 INSERTs), each with one directory sync.
    assert_eq!(reference.get("dirs"), Some(&201.0), "SQLite's pattern changed: {reference:?}");
    assert_eq!(sc["directories"].as_f64(), reference.get("dirs").copied(), "{sc}");
    assert_eq!(sc["fdatasync"].as_f64(), Some(reference["n"]), "{sc}");
    matches_reference(sc, &reference, 0.0, "sqlite3");
    split_adds_up(&sc["split"], "sqlite3 fdatasync");
    assert_eq!(r["page_cache"]["writes"]["total"]["count"].as_f64(), reference.get("w").copied(), "its pwrites");
    // Where the time went: the disk (its writeback, the journal, the flush), not the CPU.
    let w = &sc["split"]["waits"];
    let disk = mean(&w["data"]) + mean(&w["journal"]) + mean(&w["flush"]);
    assert!(disk > mean(&sc["split"]["on_cpu"]), "{sc}");
    // Each call makes the device flush its cache: by itself, or inside the commit it waited for.
    assert!(sc["own_flushes"].as_u64().unwrap() + sc["journal_waits"].as_u64().unwrap() >= 201, "{sc}");
    assert!(dev[2] >= sc["data_bios"].as_u64().unwrap() / 2, "the device took their writes: {dev:?} {sc}");
    assert_eq!(r["reconciliation"]["reconciled"], true, "{}", r["reconciliation"]);
}

/// A PostgreSQL server of our own (Debian's packages: initdb in a scratch ext4, a Unix socket
/// only), stopped on drop whatever the test did.
struct Postgres {
    bin: PathBuf,
    data: PathBuf,
    sock: PathBuf,
}

impl Postgres {
    fn start(dir: &Path) -> Postgres {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .expect("PostgreSQL is installed (scripts/setup.sh: postgresql-15)")
            .flatten()
            .map(|e| e.path().join("bin"))
            .filter(|b| b.join("initdb").exists())
            .max()
            .expect("an initdb under /usr/lib/postgresql/*/bin");
        sh("chown", &["postgres", dir.to_str().unwrap()]);
        let pg = Postgres { bin, data: dir.join("data"), sock: dir.to_path_buf() };
        pg.as_postgres("initdb", &["-D", pg.data.to_str().unwrap(), "-A", "trust", "-U", "postgres"]);
        let opts = format!("-k {} -c listen_addresses= -c shared_buffers=16MB", pg.sock.display());
        let log = dir.join("log");
        pg.as_postgres(
            "pg_ctl",
            &["-D", pg.data.to_str().unwrap(), "-o", &opts, "-l", log.to_str().unwrap(), "-w", "start"],
        );
        pg
    }

    fn as_postgres(&self, tool: &str, args: &[&str]) -> String {
        let exe = self.bin.join(tool);
        let mut a = vec!["-u", "postgres", "--", exe.to_str().unwrap()];
        a.extend_from_slice(args);
        sh("runuser", &a)
    }

    fn pgbench(&self, args: &[&str]) -> String {
        let mut a = vec!["-h", self.sock.to_str().unwrap()];
        a.extend_from_slice(args);
        a.push("postgres");
        self.as_postgres("pgbench", &a)
    }

    fn postmaster(&self) -> String {
        let pidfile = std::fs::read_to_string(self.data.join("postmaster.pid")).unwrap();
        pidfile.lines().next().unwrap().to_owned()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let exe = self.bin.join("pg_ctl");
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--", exe.to_str().unwrap(), "-D", self.data.to_str().unwrap()])
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }
}

/// pgbench against PostgreSQL, the server traced by pid: every commit waits for its WAL to reach
/// the disk (fdatasync of a preallocated segment: data and a cache flush, no journal commit), and
/// the report's sync table says how long and what for, matching bpftrace on the same calls.
#[test]
fn postgres_pgbench_commits_wait_for_the_wal() {
    require_root();
    let d = scratch("pg");
    let l = LoopDev::new(&d.join("fs.img"), 400, 512);
    sh("mkfs.ext4", &["-q", "-E", NO_LAZY_INIT, &l.0]);
    let m = Mount::new(&["-o", QUIET_EXT4, &l.0], &d.join("mnt"));
    let dir = m.0.join("pg");
    std::fs::create_dir(&dir).unwrap();
    let pg = Postgres::start(&dir);
    pg.pgbench(&["-i", "-s", "1", "-q"]);

    let bt = syscall_timer("fdatasync", "postgres");
    let mut tr = Command::new(bin())
        .args(["trace", "--pid", &pg.postmaster(), "--json", "-"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // iopath says when its probes are on; pgbench starts after that.
    let mut stderr = std::io::BufReader::new(tr.stderr.take().unwrap());
    let mut line = String::new();
    while line.is_empty() || !line.contains("iopath: tracing pid") {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "iopath trace --pid ended before attaching");
    }
    let bench = pg.pgbench(&["-c", "2", "-t", "300"]);
    // SAFETY: signalling our own child: the trace ends and reports.
    unsafe { libc::kill(tr.id() as i32, libc::SIGINT) };
    let out = tr.wait_with_output().unwrap();
    let reference = bt.stop();
    assert!(out.status.success());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(bench.contains("number of transactions actually processed: 600/600"), "{bench}");

    let sc = &r["sync_calls"];
    // The server's background writers may sync in the instants bpftrace saw and iopath did not.
    matches_reference(sc, &reference, 3.0 + reference["n"] * 0.02, "postgres");
    split_adds_up(&sc["split"], "postgres fdatasync");
    // Synchronous commit: a WAL flush per commit, fewer when commits group.
    let n = sc["fdatasync"].as_f64().unwrap();
    assert!((300.0..=660.0).contains(&n), "{n} fdatasyncs for 600 commits");
    let w = &sc["split"]["waits"];
    let disk = mean(&w["data"]) + mean(&w["journal"]) + mean(&w["flush"]);
    assert!(disk > mean(&sc["split"]["on_cpu"]), "a WAL flush waits for the disk: {sc}");
    assert!(r["page_cache"]["writes"]["total"]["count"].as_u64().unwrap() > 0, "the WAL's own writes");
    // The backends' CPU, not the postmaster's alone (which showed 0.0% while they worked).
    let cpu = r["cpu"]["usr_ns"].as_u64().unwrap() + r["cpu"]["sys_ns"].as_u64().unwrap();
    assert!(cpu >= 10_000_000, "600 transactions took {cpu} ns of the server's CPU");
}
