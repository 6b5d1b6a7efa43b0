//! deploy/: the DaemonSet gives `iopath serve` exactly the rights the systemd unit does
//! (docs/fleet/iopath.service, whose capabilities tests/top.rs proves necessary one by one), and
//! the Containerfile packs the static binary the rig builds. The manifest is parsed as YAML
//! (python3-yaml), not grepped.

use std::path::Path;

use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn manifest() -> Value {
    let out = std::process::Command::new("python3")
        .args(["-c", "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))"])
        .arg(root().join("deploy/daemonset.yaml"))
        .output()
        .expect("python3 runs (scripts/setup.sh installs python3-yaml)");
    assert!(out.status.success(), "deploy/daemonset.yaml does not parse: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The unit's `Key=` values (the last one wins, as systemd reads them).
fn unit(key: &str) -> String {
    let text = std::fs::read_to_string(root().join("docs/fleet/iopath.service")).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix(&format!("{key}=")))
        .next_back()
        .unwrap_or_else(|| panic!("the unit has no {key}="))
        .to_owned()
}

#[test]
fn the_daemonset_has_the_units_rights_and_no_more() {
    let m = manifest();
    assert_eq!(m["kind"], "DaemonSet");
    let spec = &m["spec"]["template"]["spec"];
    assert_eq!(spec["hostPID"], true, "rows are the host's processes");
    let c = &spec["containers"][0];
    let sc = &c["securityContext"];
    // The unit: DynamicUser (not root), NoNewPrivileges, the capabilities below and no others.
    assert_eq!(sc["runAsNonRoot"], true);
    assert_ne!(sc["runAsUser"], 0);
    assert_eq!(sc["allowPrivilegeEscalation"], false, "NoNewPrivileges=yes");
    assert_eq!(unit("NoNewPrivileges"), "yes");
    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
    let mut added: Vec<String> =
        sc["capabilities"]["add"].as_array().unwrap().iter().map(|v| format!("CAP_{}", v.as_str().unwrap())).collect();
    added.sort();
    for key in ["AmbientCapabilities", "CapabilityBoundingSet"] {
        let mut caps: Vec<String> = unit(key).split_whitespace().map(str::to_owned).collect();
        caps.sort();
        assert_eq!(added, caps, "the DaemonSet's capabilities against the unit's {key}");
    }
    // The kernel's trees, read-only (the unit's ProtectSystem=strict makes them so).
    let mounts = c["volumeMounts"].as_array().unwrap();
    for path in ["/sys/kernel/tracing", "/sys/fs/cgroup", "/var/log/pods"] {
        let v = mounts.iter().find(|v| v["mountPath"] == path).unwrap_or_else(|| panic!("{path} not mounted"));
        assert_eq!(v["readOnly"], true, "{path}");
        let vol = spec["volumes"].as_array().unwrap().iter().find(|x| x["name"] == v["name"]).unwrap();
        assert_eq!(vol["hostPath"]["path"], path);
    }
    // serve's arguments: the unit's --cgroups, listening where the scrape annotations point.
    let args: Vec<&str> = c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(args[0], "serve");
    let exec = unit("ExecStart");
    let cg = |a: &[&str]| a.iter().position(|x| *x == "--cgroups").map(|i| a[i + 1].to_owned());
    assert_eq!(cg(&args), cg(&exec.split_whitespace().collect::<Vec<_>>()), "--cgroups as the unit's");
    let listen = args[args.iter().position(|a| *a == "--listen").unwrap() + 1];
    let port = listen.rsplit(':').next().unwrap();
    let ann = &m["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(ann["prometheus.io/scrape"], "true");
    assert_eq!(ann["prometheus.io/port"], port);
    assert_eq!(ann["prometheus.io/path"], "/metrics");
    assert_eq!(c["ports"][0]["containerPort"].as_u64().unwrap().to_string(), port);
    // The unit's memory ceiling.
    assert_eq!(unit("MemoryMax"), "256M");
    assert_eq!(c["resources"]["limits"]["memory"], "256Mi");
}

#[test]
fn the_image_packs_the_static_binary_and_runs_serve_as_the_daemonset_does() {
    let cf = std::fs::read_to_string(root().join("deploy/Containerfile")).unwrap();
    let script = std::fs::read_to_string(root().join("scripts/build-static.sh")).unwrap();
    let built = "target/vmtest/x86_64-unknown-linux-gnu/release/iopath";
    assert!(script.contains(built), "scripts/build-static.sh no longer writes {built}");
    assert!(cf.lines().any(|l| l.starts_with("COPY ") && l.contains(built)), "the image copies {built}");
    assert!(cf.lines().any(|l| l.trim() == "FROM scratch"), "a static binary needs no base image");
    assert!(cf.contains("USER 65534"), "not root, as the DaemonSet");
    let m = manifest();
    let args = m["spec"]["template"]["spec"]["containers"][0]["args"].clone();
    let cmd = cf.lines().find_map(|l| l.strip_prefix("CMD ")).expect("a CMD");
    let cmd: Value = serde_json::from_str(cmd).unwrap();
    assert_eq!(cmd, args, "the image's default command is the DaemonSet's");
}
