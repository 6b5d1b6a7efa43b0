//! Folded stacks (FlameGraph's format: `frame;frame;frame count`, outermost frame first), the
//! common currency of iopath's sampler, perf's collapser, the SVG and the differential graph.

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::{bail, Result};

/// One stack with names, outermost frame first, and its weight.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NamedStack {
    pub comm: String,
    pub user: Vec<String>,
    pub kernel: Vec<String>,
    pub value: u64,
}

/// Folded lines: `comm;user frames;kernel frames_[k]` (the `_[k]` suffix is FlameGraph's mark for
/// kernel frames), merged and sorted.
pub fn fold(stacks: &[NamedStack]) -> Vec<(String, u64)> {
    let mut merged: BTreeMap<String, u64> = BTreeMap::new();
    for s in stacks.iter().filter(|s| s.value > 0) {
        let mut line = sanitize(&s.comm);
        for f in &s.user {
            line.push(';');
            line.push_str(&sanitize(f));
        }
        for f in &s.kernel {
            line.push(';');
            line.push_str(&sanitize(f));
            line.push_str("_[k]");
        }
        *merged.entry(line).or_default() += s.value;
    }
    merged.into_iter().collect()
}

/// Drops the frames inside `leaf` (kernel frames, outermost first): an off-CPU stack taken in the
/// sched_switch tracepoint ends in the tracer's own frames below `__schedule`.
pub fn trim_kernel_below(stacks: &mut [NamedStack], leaf: &str) {
    for s in stacks {
        if let Some(i) = s.kernel.iter().position(|f| f == leaf) {
            s.kernel.truncate(i + 1);
        }
    }
}

/// Frame names may hold neither the separator nor a newline.
fn sanitize(name: &str) -> String {
    // ';' separates frames; control characters (a comm's newline, an escape sequence) are
    // spelled out as everywhere else (untrusted::visible).
    crate::untrusted::visible(name).replace(';', "_")
}

pub fn write(lines: &[(String, u64)], w: &mut impl Write) -> std::io::Result<()> {
    for (stack, n) in lines {
        writeln!(w, "{stack} {n}")?;
    }
    Ok(())
}

/// Reads folded text (ours, flamegraph.pl's or inferno's), merging repeated stacks.
pub fn parse(text: &str) -> Result<Vec<(String, u64)>> {
    let mut merged: BTreeMap<String, u64> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.is_empty() {
            continue;
        }
        let Some((stack, n)) = line.rsplit_once(' ') else {
            bail!("line {}: not a folded stack ('frame;frame COUNT'): {line:.80}", i + 1);
        };
        let Ok(n) = n.parse::<u64>() else {
            bail!(
                "line {}: the count '{n}' is not a whole number (a differential file? give the two folded inputs)",
                i + 1
            );
        };
        *merged.entry(stack.to_owned()).or_default() += n;
    }
    if merged.is_empty() {
        bail!("no folded stacks in the input");
    }
    Ok(merged.into_iter().collect())
}

/// Each frame name's inclusive share of all samples (a frame counted once per stack however
/// often it recurs), largest first.
pub fn inclusive_shares(lines: &[(String, u64)]) -> Vec<(String, f64)> {
    let total: u64 = lines.iter().map(|(_, n)| n).sum();
    let mut by: BTreeMap<&str, u64> = BTreeMap::new();
    for (stack, n) in lines {
        let mut seen: Vec<&str> = stack.split(';').collect();
        seen.sort_unstable();
        seen.dedup();
        for f in seen {
            *by.entry(f).or_default() += n;
        }
    }
    let mut v: Vec<(String, f64)> =
        by.into_iter().map(|(f, n)| (f.to_owned(), if total > 0 { n as f64 / total as f64 } else { 0.0 })).collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(comm: &str, user: &[&str], kernel: &[&str], value: u64) -> NamedStack {
        NamedStack {
            comm: comm.into(),
            user: user.iter().map(|s| s.to_string()).collect(),
            kernel: kernel.iter().map(|s| s.to_string()).collect(),
            value,
        }
    }

    #[test]
    fn folds_merges_and_marks_kernel_frames() {
        let lines = fold(&[
            st("fio", &["main", "td_io_queue"], &["__x64_sys_io_uring_enter", "io_submit_sqes"], 3),
            st("fio", &["main", "td_io_queue"], &["__x64_sys_io_uring_enter", "io_submit_sqes"], 2),
            st("fio", &["main"], &[], 1),
            st("fio", &["a;b"], &[], 0),
        ]);
        assert_eq!(
            lines,
            vec![
                ("fio;main".to_string(), 1),
                ("fio;main;td_io_queue;__x64_sys_io_uring_enter_[k];io_submit_sqes_[k]".to_string(), 5),
            ]
        );
        let mut out = Vec::new();
        write(&lines, &mut out).unwrap();
        assert_eq!(parse(std::str::from_utf8(&out).unwrap()).unwrap(), lines);
    }

    #[test]
    fn offcpu_stacks_end_at_schedule() {
        let mut v = vec![st(
            "t",
            &[],
            &["do_syscall_64", "schedule", "__schedule", "__traceiter_sched_switch", "bpf_trace_run4"],
            1,
        )];
        trim_kernel_below(&mut v, "__schedule");
        assert_eq!(v[0].kernel, vec!["do_syscall_64", "schedule", "__schedule"]);
    }

    #[test]
    fn parse_rejects_garbage_clearly() {
        assert!(parse("").unwrap_err().to_string().contains("no folded stacks"));
        assert!(parse("a;b x\n").unwrap_err().to_string().contains("line 1"));
        assert!(parse("a;b 1 2\n").is_ok()); // "a;b 1" is the stack: valid
    }

    #[test]
    fn shares_are_inclusive() {
        let s = inclusive_shares(&[("a;b;c".into(), 3), ("a;c;c".into(), 1)]);
        let get = |f: &str| s.iter().find(|(n, _)| n == f).unwrap().1;
        assert_eq!(get("a"), 1.0);
        assert_eq!(get("c"), 1.0);
        assert_eq!(get("b"), 0.75);
    }
}
