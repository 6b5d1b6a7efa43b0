//! The traced command's whole process tree ends with iopath, even when iopath is SIGKILLed (no
//! handler of its own runs then). PR_SET_PDEATHSIG reaches the direct child only: fio's two
//! workers outlived a killed `iopath trace -- fio --numjobs=2` under pid 1. So iopath starts a
//! watchdog (`iopath __watchdog PID START`, a fresh process, not a fork of a threaded one) holding
//! the read end of a pipe whose write end only iopath has. The pipe closing without a "done" byte
//! means iopath died: the watchdog stops the command's tree (SIGSTOP, so nothing forks while it
//! looks), then kills every process in it. The command is recognised by its pid and start time,
//! so a recycled pid is never touched.

use std::io::Read;
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

/// iopath's end of the watchdog's pipe. Dropping it without `done` (iopath killed) fires the
/// watchdog.
pub struct Watchdog {
    pipe: std::process::ChildStdin,
    child: std::process::Child,
}

/// A process's start time (clock ticks since boot, /proc/PID/stat field 22) and parent pid.
pub fn start_and_parent(pid: u32) -> Option<(u64, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f: Vec<&str> = stat[stat.rfind(')')? + 2..].split_whitespace().collect();
    Some((f.get(19)?.parse().ok()?, f.get(1)?.parse().ok()?))
}

/// Whether `pid` has ended: gone, or a zombie waiting for its parent to reap it.
pub fn ended(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return true };
    let state = stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().next());
    matches!(state, None | Some("Z") | Some("X"))
}

impl Watchdog {
    /// Watches the command `pid` (just started by this process).
    pub fn start(pid: u32) -> Result<Watchdog> {
        let (start, _) = start_and_parent(pid).context("reading the command's start time")?;
        let exe = std::env::current_exe().context("finding iopath's own executable for its watchdog")?;
        let mut child = Command::new(exe)
            .args(["__watchdog", &pid.to_string(), &start.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting the watchdog that ends the command's processes with iopath")?;
        let pipe = child.stdin.take().context("the watchdog's pipe")?;
        Ok(Watchdog { pipe, child })
    }

    /// The watchdog's own pid (not part of the traced tree).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// iopath ends normally (it ended the command itself): the watchdog leaves.
    pub fn done(mut self) {
        use std::io::Write;
        let _ = self.pipe.write_all(b"d");
        drop(self.pipe);
        let _ = self.child.wait();
    }
}

/// The watchdog's body (`iopath __watchdog PID START`): waits for its pipe to close, then ends
/// the tree of PID if PID is still the process that started at START. Returns what it killed.
pub fn run(pid: u32, start: u64) -> usize {
    // Ctrl-C at the terminal reaches iopath's whole process group: the watchdog must outlive it.
    // SAFETY: setting signal dispositions to ignore.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
    }
    let mut b = [0u8; 1];
    let mut stdin = std::io::stdin();
    let done = loop {
        match stdin.read(&mut b) {
            Ok(0) => break false,
            Ok(_) => break b[0] == b'd',
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break false,
        }
    };
    if done || start_and_parent(pid).map(|(s, _)| s) != Some(start) {
        return 0;
    }
    kill_tree(vec![pid])
}

/// Stops the trees under `roots` until no new process appears (SIGSTOP: nothing forks while it
/// looks), then kills every process in them. Returns the pids killed.
pub fn kill_tree(roots: Vec<u32>) -> usize {
    kill_tree_pids(roots).len()
}

fn kill_tree_pids(mut tree: Vec<u32>) -> Vec<u32> {
    if tree.is_empty() {
        return tree;
    }
    loop {
        let mut grew = false;
        for p in tree.clone() {
            // SAFETY: signalling a process of the tree.
            unsafe { libc::kill(p as i32, libc::SIGSTOP) };
        }
        for p in children_of(&tree) {
            if !tree.contains(&p) {
                tree.push(p);
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
    for &p in &tree {
        // SAFETY: as above.
        unsafe { libc::kill(p as i32, libc::SIGKILL) };
    }
    tree
}

/// Makes this process the reaper of its descendants' orphans (PR_SET_CHILD_SUBREAPER): a traced
/// command's children that outlive it come to iopath, not to pid 1, so `end_children` still
/// finds them (a child ignoring SIGTERM had kept running under pid 1 after `--duration`).
pub fn become_subreaper() {
    // SAFETY: prctl with an integer argument.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong) };
}

/// Ends every process below this one but `keep` (the watchdog) — the traced command's whole
/// tree, whatever way the trace ended — and reaps those that were its children. Returns how many
/// were killed.
pub fn end_children(keep: &[u32]) -> usize {
    let me = std::process::id();
    let roots: Vec<u32> = children_of(&[me]).into_iter().filter(|p| !keep.contains(p)).collect();
    let killed = kill_tree_pids(roots);
    for &p in &killed {
        if start_and_parent(p).is_some_and(|(_, pp)| pp == me) {
            let mut st = 0;
            // SAFETY: reaping our own child, just SIGKILLed.
            unsafe { libc::waitpid(p as i32, &mut st, 0) };
        }
    }
    killed.len()
}

/// Every process whose parent is in `of`.
pub fn children_of(of: &[u32]) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if start_and_parent(p).is_some_and(|(_, pp)| of.contains(&pp)) {
            out.push(p);
        }
    }
    out
}
