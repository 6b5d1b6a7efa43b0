//! Bad input gets a clear error naming the problem and the fix, a non-zero exit, and no panic.

mod common;
use common::*;

#[test]
fn malformed_flags() {
    for (args, says) in [
        (&["--engine", "spdk"][..], "invalid value 'spdk'"),
        (&["--qd", "0"], "--qd must be at least 1"),
        (&["--bs", "4q"], "unknown size suffix"),
        (&["--size", "big"], "not a size"),
        (&["--runtime", "5 parsecs"], "unknown duration unit"),
        (&["--bs", "8k", "--size", "4k"], "smaller than --bs"),
        (&["--cpus", "3-1"], "not a CPU list"),
        (&["--engine", "psync", "--qd", "4"], "one I/O at a time"),
    ] {
        let err = run_err(args);
        assert!(err.contains(says), "{args:?}: expected '{says}' in: {err}");
    }
}

#[test]
fn target_problems() {
    require_root();
    let d = scratch("bad");
    let err = run_err(&["--file", d.join("no/such/dir/f").to_str().unwrap(), "--ios", "1"]);
    assert!(err.contains("does not exist"), "{err}");

    // An immutable file cannot be opened for writing, even by root.
    let f = d.join("immutable.dat");
    std::fs::write(&f, vec![1u8; 1 << 20]).unwrap();
    sh("chattr", &["+i", f.to_str().unwrap()]);
    let err = run_err(&["--file", f.to_str().unwrap(), "--rw", "randwrite", "--ios", "10"]);
    sh("chattr", &["-i", f.to_str().unwrap()]);
    assert!(err.contains("cannot open") && err.contains("not writable"), "{err}");

    // A device whose logical block size is 4096 refuses 512-byte O_DIRECT I/O: say so up front.
    let l = LoopDev::new(&d.join("lbs4k"), 16, 4096);
    let err = run_err(&["--device", &l.0, "--bs", "512", "--ios", "10"]);
    assert!(err.contains("logical block size (4096 bytes)"), "{err}");

    // --iopoll where the driver has no poll queues: explained, not a bare EOPNOTSUPP.
    let err = run_err(&["--file", d.join("p.dat").to_str().unwrap(), "--size", "4m", "--iopoll", "--ios", "10"]);
    assert!(err.contains("no poll queues") && err.contains("poll_queues"), "{err}");

    // Writing a raw device needs --allow-write.
    let err = run_err(&["--device", &l.0, "--rw", "write", "--ios", "10"]);
    assert!(err.contains("--allow-write"), "{err}");
}

#[test]
fn a_mounted_device_is_never_written() {
    require_root();
    let d = scratch("mounted");
    let l = LoopDev::new(&d.join("fs.img"), 32, 512);
    sh("mkfs.ext4", &["-q", &l.0]);
    let m = Mount::new(&[&l.0], &d.join("mnt"));
    std::fs::write(m.0.join("canary"), b"still here").unwrap();
    let err = run_err(&["--device", &l.0, "--rw", "randwrite", "--allow-write", "--ios", "10"]);
    assert!(err.contains("refusing to write") && err.contains("mounted"), "{err}");
    assert_eq!(std::fs::read(m.0.join("canary")).unwrap(), b"still here");
}

#[test]
fn not_root() {
    require_root();
    // nobody cannot trace: doctor says why and exits non-zero.
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", bin(), "doctor"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "doctor as nobody must fail: {text}");
    assert!(text.contains("tracing is NOT possible") && text.contains("run as root"), "{text}");
    // ...and cannot read a raw device.
    let out = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            bin(),
            "run",
            "--device",
            "/dev/vda",
            "--ios",
            "1",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("Permission denied") && err.contains("root"), "{err}");
}
