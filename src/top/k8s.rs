//! Containers from cgroup paths: the pod, container and QoS class a Kubernetes node's cgroup
//! names (systemd and cgroupfs drivers, containerd, CRI-O and Docker runtimes), and Docker's and
//! Podman's own scopes; the pod's namespace and name from the directories kubelet keeps under
//! /var/log/pods (`<namespace>_<name>_<uid>`). Pure: strings and a folder listing in, labels out.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// What a cgroup path says about the container in it.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Container {
    /// The pod's UID (dashes, as the API shows it), for Kubernetes pods.
    pub pod_uid: Option<String>,
    /// The container's runtime id (the full hex id).
    pub container_id: Option<String>,
    /// guaranteed, burstable or besteffort (Kubernetes pods).
    pub qos: Option<String>,
    /// From the pod directories kubelet keeps.
    pub namespace: Option<String>,
    pub pod: Option<String>,
}

impl Container {
    /// As Prometheus labels (only those known).
    pub fn labels(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (k, v) in [
            ("namespace", self.namespace.as_deref()),
            ("pod", self.pod.as_deref()),
            ("pod_uid", self.pod_uid.as_deref()),
            ("container_id", self.container_id.as_deref()),
            ("qos", self.qos.as_deref()),
        ] {
            if let Some(v) = v {
                out.push((k.to_owned(), v.to_owned()));
            }
        }
        out
    }

    /// top's group key: the pod (namespace/name when known, else its UID), or the container.
    pub fn key(&self) -> Option<String> {
        match (&self.namespace, &self.pod, &self.pod_uid, &self.container_id) {
            (Some(ns), Some(p), _, _) => Some(format!("{ns}/{p}")),
            (_, _, Some(uid), _) => Some(format!("pod {uid}")),
            (_, _, _, Some(id)) => Some(format!("container {}", &id[..id.len().min(12)])),
            _ => None,
        }
    }
}

fn hex_id(s: &str) -> Option<String> {
    (s.len() >= 12 && s.chars().all(|c| c.is_ascii_hexdigit())).then(|| s.to_owned())
}

/// The container id of a runtime's scope or directory name: `cri-containerd-<id>.scope`,
/// `crio-<id>.scope`, `docker-<id>.scope`, `libpod-<id>.scope`, or a bare id (cgroupfs).
fn container_of(part: &str) -> Option<String> {
    let p = part.strip_suffix(".scope").unwrap_or(part);
    for prefix in ["cri-containerd-", "crio-", "docker-", "libpod-"] {
        if let Some(id) = p.strip_prefix(prefix) {
            return hex_id(id);
        }
    }
    hex_id(p)
}

/// The pod UID of `kubepods-burstable-pod<uid>.slice` (systemd: underscores for dashes) or
/// `pod<uid>` (cgroupfs).
fn pod_of(part: &str) -> Option<String> {
    let p = part.strip_suffix(".slice").unwrap_or(part);
    let uid = p.rsplit_once("pod").map(|(_, u)| u)?;
    let uid = uid.replace('_', "-");
    (uid.len() == 36 && uid.chars().all(|c| c.is_ascii_hexdigit() || c == '-')).then_some(uid)
}

/// A cgroup path (as /proc/PID/cgroup gives it) to the container in it; None for a path of no
/// container (a system service, a user session).
pub fn parse(cgroup: &str) -> Option<Container> {
    let parts: Vec<&str> = cgroup.split('/').filter(|p| !p.is_empty()).collect();
    let kube = parts.iter().position(|p| *p == "kubepods.slice" || *p == "kubepods");
    let mut c = Container::default();
    if let Some(i) = kube {
        let rest = &parts[i + 1..];
        c.qos = Some(
            match rest.first().copied() {
                Some(p) if p.contains("burstable") => "burstable",
                Some(p) if p.contains("besteffort") => "besteffort",
                _ => "guaranteed",
            }
            .to_owned(),
        );
        c.pod_uid = rest.iter().find_map(|p| pod_of(p));
        c.container_id = rest.iter().rev().find_map(|p| container_of(p)).filter(|_| rest.len() >= 2);
        return c.pod_uid.is_some().then_some(c);
    }
    // Docker (`docker-<id>.scope`, `/docker/<id>`) and Podman (`libpod-<id>.scope`).
    let last = parts.last()?;
    let runtime = last.starts_with("docker-")
        || last.starts_with("libpod-")
        || parts.iter().rev().nth(1).is_some_and(|p| *p == "docker" || *p == "libpod_parent");
    c.container_id = runtime.then(|| container_of(last)).flatten();
    c.container_id.is_some().then_some(c)
}

/// Pod UID -> (namespace, name), from kubelet's pod log directories (`<namespace>_<name>_<uid>`)
/// under `root` (/var/log/pods on a node). Nothing when the folder is absent.
pub fn pod_names(root: &Path) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        // Namespaces and pod names hold no '_' (DNS labels): the split is unambiguous.
        let mut it = name.splitn(3, '_');
        if let (Some(ns), Some(pod), Some(uid)) = (it.next(), it.next(), it.next()) {
            // Anyone who can make a folder there names a label: only Kubernetes' own names pass
            // (a folder `ns_x"} 1\ninjected 666_...` had written lines of its own choosing).
            let names_ok = crate::untrusted::is_dns_label(ns) && crate::untrusted::is_dns_subdomain(pod);
            if names_ok && pod_of(&format!("pod{uid}")).is_some() {
                out.insert(uid.to_owned(), (ns.to_owned(), pod.to_owned()));
            }
        }
    }
    out
}

/// `parse` with the pod's namespace and name filled in from `names`.
pub fn container(cgroup: &str, names: &BTreeMap<String, (String, String)>) -> Option<Container> {
    let mut c = parse(cgroup)?;
    if let Some((ns, pod)) = c.pod_uid.as_ref().and_then(|u| names.get(u)) {
        c.namespace = Some(ns.clone());
        c.pod = Some(pod.clone());
    }
    Some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "8f3e4a2c-1b2d-4c5e-9f60-7a8b9c0d1e2f";
    const ID: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904cafebabe0123456789abcdef";

    #[test]
    fn systemd_and_cgroupfs_pods_name_their_pod_container_and_qos() {
        let u = UID.replace('-', "_");
        let systemd = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u}.slice/cri-containerd-{ID}.scope"
        );
        let c = parse(&systemd).unwrap();
        assert_eq!(
            (c.pod_uid.as_deref(), c.container_id.as_deref(), c.qos.as_deref()),
            (Some(UID), Some(ID), Some("burstable"))
        );
        // Guaranteed pods sit right under kubepods; CRI-O names its scopes crio-.
        let g = parse(&format!("/kubepods.slice/kubepods-pod{u}.slice/crio-{ID}.scope")).unwrap();
        assert_eq!((g.qos.as_deref(), g.container_id.as_deref()), (Some("guaranteed"), Some(ID)));
        // cgroupfs driver: plain directories.
        let f = parse(&format!("/kubepods/besteffort/pod{UID}/{ID}")).unwrap();
        assert_eq!(
            (f.pod_uid.as_deref(), f.container_id.as_deref(), f.qos.as_deref()),
            (Some(UID), Some(ID), Some("besteffort"))
        );
        // The pod's own cgroup (its pause container's parent): the pod, no container.
        let p = parse(&format!("/kubepods/burstable/pod{UID}")).unwrap();
        assert_eq!((p.pod_uid.as_deref(), p.container_id), (Some(UID), None));
    }

    #[test]
    fn docker_and_podman_scopes_name_their_container_and_nothing_else_is_one() {
        for path in [
            format!("/system.slice/docker-{ID}.scope"),
            format!("/docker/{ID}"),
            format!("/machine.slice/libpod-{ID}.scope"),
            format!("/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope"),
        ] {
            let c = parse(&path).unwrap_or_else(|| panic!("{path}"));
            assert_eq!((c.container_id.as_deref(), c.pod_uid.as_deref()), (Some(ID), None), "{path}");
        }
        for none in ["/", "/system.slice/sshd.service", "/user.slice/user-1000.slice/session-3.scope", "/t1", "?"] {
            assert_eq!(parse(none), None, "{none}");
        }
    }

    #[test]
    fn pod_directories_give_namespace_and_name() {
        let d = std::env::temp_dir().join(format!("iopath-pods-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join(format!("shop_cart-7d9f_{UID}"))).unwrap();
        std::fs::create_dir_all(d.join("not-a-pod")).unwrap();
        // A folder anyone could make there, naming labels of its own choosing: not a pod.
        let uid2 = "9f3e4a2c-1b2d-4c5e-9f60-7a8b9c0d1e2f";
        std::fs::create_dir_all(d.join(format!("ns_x\"}} 1\ninjected 666_{uid2}"))).unwrap();
        std::fs::create_dir_all(d.join(format!("Shop_cart_{uid2}"))).unwrap();
        let names = pod_names(&d);
        assert_eq!(names.get(UID), Some(&("shop".to_owned(), "cart-7d9f".to_owned())));
        assert_eq!(names.len(), 1);
        let c = container(&format!("/kubepods/pod{UID}/{ID}"), &names).unwrap();
        assert_eq!(c.key().as_deref(), Some("shop/cart-7d9f"));
        let l = c.labels();
        assert!(l.contains(&("namespace".into(), "shop".into())) && l.contains(&("qos".into(), "guaranteed".into())));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
