//! The job: what to run, shared by `run` (and later `trace` and `sweep`). Plain data plus the
//! parsers for the units fio users type (sizes, durations, CPU lists) and the checks that need no
//! target. Checks that need the target (block size vs. logical block size, mounted device) live
//! in `loadgen::target`.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// io_uring (io_uring_enter)
    Uring,
    /// Linux native AIO (io_submit / io_getevents)
    Aio,
    /// pread/pwrite, one I/O at a time per thread
    Psync,
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EngineKind::Uring => "uring",
            EngineKind::Aio => "aio",
            EngineKind::Psync => "psync",
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Rw {
    Randread,
    Randwrite,
    Read,
    Write,
    Randrw,
}

impl Rw {
    pub fn is_random(self) -> bool {
        matches!(self, Rw::Randread | Rw::Randwrite | Rw::Randrw)
    }
    pub fn writes(self) -> bool {
        !matches!(self, Rw::Randread | Rw::Read)
    }
    pub fn reads(self) -> bool {
        !matches!(self, Rw::Randwrite | Rw::Write)
    }
}

impl fmt::Display for Rw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Rw::Randread => "randread",
            Rw::Randwrite => "randwrite",
            Rw::Read => "read",
            Rw::Write => "write",
            Rw::Randrw => "randrw",
        };
        f.write_str(s)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "path")]
pub enum Target {
    /// A regular file, created and laid out when missing or short.
    File(PathBuf),
    /// A block device; written only with `allow_write`.
    Device(PathBuf),
}

impl Target {
    pub fn path(&self) -> &std::path::Path {
        match self {
            Target::File(p) | Target::Device(p) => p,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stop {
    /// Run for this long (nanoseconds in JSON).
    Runtime(#[serde(serialize_with = "ser_ns", deserialize_with = "de_ns")] Duration),
    /// Complete this many I/Os in total, shared across the job's threads.
    Ios(u64),
}

fn ser_ns<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_nanos() as u64)
}

fn de_ns<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    u64::deserialize(d).map(Duration::from_nanos)
}

/// Everything that defines a workload. Built from the CLI in `cli::JobArgs::to_job`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Job {
    pub engine: EngineKind,
    pub rw: Rw,
    /// Read share in percent for `randrw`.
    pub mix_read_pct: u8,
    pub bs: u32,
    pub qd: u32,
    /// Bytes of the target to use; `None` = the whole existing file or device.
    pub size: Option<u64>,
    pub stop: Stop,
    pub target: Target,
    pub direct: bool,
    pub allow_write: bool,
    pub jobs: u32,
    pub cpus: Option<Vec<usize>>,
    pub seed: u64,
    pub sqpoll: bool,
    pub iopoll: bool,
    pub fixed_bufs: bool,
    /// io_uring: every SQE with IOSQE_ASYNC, so io-wq workers issue it (fio's force_async).
    #[serde(default)]
    pub force_async: bool,
    /// psync: preadv2/pwritev2 with RWF_HIPRI (fio's pvsync2 hipri): polled sync I/O.
    #[serde(default)]
    pub hipri: bool,
    /// psync: fsync(2) after every N writes (fio's fsync=N); 0 = never.
    #[serde(default)]
    pub fsync: u32,
    /// psync: fdatasync(2) after every N writes (fio's fdatasync=N); 0 = never.
    #[serde(default)]
    pub fdatasync: u32,
    /// Open the target O_SYNC (fio's sync=1): every write waits for its data and metadata.
    #[serde(default)]
    pub sync: bool,
    /// Most I/Os handed to the kernel per submit call (fio's iodepth_batch_submit, default 1); 0 = all free slots.
    pub batch_submit: u32,
    /// Fewest completions to wait for per reap call (fio's iodepth_batch_complete_min).
    pub batch_complete: u32,
    /// Stamp written blocks with a (seed, offset) pattern and check it on reads.
    pub verify: bool,
    /// The report's time series: one point per this long (`--interval`). How the run is shown,
    /// not what it does: left out of the job's JSON (compare would call it a change of job).
    #[serde(skip_serializing, default = "default_interval")]
    pub interval: Duration,
    /// The latency percentiles the report lists (`--percentiles`, fio's percentile_list): how
    /// the run is shown, left out of the job's JSON as `interval` is (the report carries them).
    #[serde(skip_serializing, default = "default_percentiles")]
    pub percentiles: Vec<f64>,
}

/// `--percentiles`: a comma list of percentiles in (0, 100), kept in the order given without
/// repeats (fio's percentile_list).
#[derive(Clone, Debug, PartialEq)]
pub struct Percentiles(pub Vec<f64>);

pub fn parse_percentiles(s: &str) -> Result<Percentiles, String> {
    let mut out: Vec<f64> = Vec::new();
    for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match p.parse::<f64>() {
            Ok(v) if v > 0.0 && v < 100.0 => {
                if !out.contains(&v) {
                    out.push(v);
                }
            }
            _ => return Err(format!("'{p}' is not a percentile between 0 and 100 (e.g. 50,99,99.9)")),
        }
    }
    if out.is_empty() {
        return Err("give at least one percentile, e.g. 50,99".into());
    }
    Ok(Percentiles(out))
}

pub fn default_percentiles() -> Vec<f64> {
    vec![50.0, 99.0]
}

/// `--interval`: at least 10 ms (each point is a histogram per worker, and the trace reads nine
/// histograms from the kernel at each edge).
pub fn check_interval(d: Duration) -> anyhow::Result<()> {
    anyhow::ensure!(
        d >= Duration::from_millis(10),
        "--interval {d:?} is too short for a time series (at least 10ms: each point is a histogram per worker)"
    );
    Ok(())
}

fn default_interval() -> Duration {
    Duration::from_secs(1)
}

/// Size of the scratch file used when the job names no target.
pub const DEFAULT_SCRATCH_SIZE: u64 = 1 << 30;
pub const DEFAULT_SCRATCH_NAME: &str = "iopath-scratch.dat";

impl Job {
    /// A plain job for unit tests: uring randread 4k qd1 on a scratch file, 1 s.
    #[cfg(test)]
    pub fn example() -> Job {
        Job {
            engine: EngineKind::Uring,
            rw: Rw::Randread,
            mix_read_pct: 50,
            bs: 4096,
            qd: 1,
            size: Some(DEFAULT_SCRATCH_SIZE),
            stop: Stop::Runtime(Duration::from_secs(1)),
            target: Target::File(DEFAULT_SCRATCH_NAME.into()),
            direct: true,
            allow_write: false,
            jobs: 1,
            cpus: None,
            seed: 1,
            sqpoll: false,
            iopoll: false,
            fixed_bufs: false,
            force_async: false,
            hipri: false,
            fsync: 0,
            fdatasync: 0,
            sync: false,
            batch_submit: 1,
            batch_complete: 1,
            verify: false,
            interval: default_interval(),
            percentiles: default_percentiles(),
        }
    }

    /// Checks that need nothing but the job itself. Each error says what to change.
    pub fn validate(&self) -> Result<()> {
        if self.qd == 0 {
            bail!("--qd must be at least 1");
        }
        if self.qd > 65536 {
            bail!("--qd {} is larger than any engine allows (at most 65536)", self.qd);
        }
        if self.engine == EngineKind::Uring && self.qd > 32768 {
            bail!(
                "--qd {} is more than an io_uring ring holds (32768 entries, IORING_MAX_ENTRIES): use --qd 32768 or \
                 less, and --jobs for more rings",
                self.qd
            );
        }
        if self.jobs > MAX_JOBS {
            bail!(
                "--jobs {} is more worker threads than iopath runs (at most {MAX_JOBS}): each sets up its own file, \
                 buffers and ring before the start line, and thousands measure thread start-up, not I/O",
                self.jobs
            );
        }
        if self.bs == 0 {
            bail!("--bs must be larger than 0");
        }
        if self.direct && self.bs % 512 != 0 {
            bail!(
                "--bs {} is not a multiple of 512: O_DIRECT needs block-aligned sizes (use e.g. --bs 4k, or --direct false)",
                self.bs
            );
        }
        if let Some(size) = self.size {
            if size < self.bs as u64 {
                bail!(
                    "--size {} is smaller than --bs {}: there is not one block to do I/O on",
                    fmt_bytes(size),
                    fmt_bytes(self.bs as u64)
                );
            }
        }
        if self.mix_read_pct > 100 {
            bail!("--mix is a read percentage: 0 to 100");
        }
        if self.jobs == 0 {
            bail!("--jobs must be at least 1");
        }
        match self.stop {
            Stop::Runtime(d) if d.is_zero() => bail!("--runtime must be longer than 0"),
            Stop::Ios(0) => bail!("--ios must be at least 1"),
            _ => {}
        }
        if self.engine == EngineKind::Psync && self.qd != 1 {
            bail!(
                "psync does one I/O at a time per thread: --qd {} cannot apply (use --qd 1, and --jobs N for parallelism)",
                self.qd
            );
        }
        // One synchronous call per I/O: nothing to batch (a sweep over batch sizes would repeat
        // the same psync run under different names).
        if self.engine == EngineKind::Psync && (self.batch_submit != 1 || self.batch_complete != 1) {
            bail!("--batch-submit and --batch-complete batch io_uring and aio calls: psync makes one call per I/O");
        }
        if self.engine != EngineKind::Uring && (self.sqpoll || self.iopoll || self.fixed_bufs) {
            bail!("--sqpoll, --iopoll and --fixed-bufs are io_uring options: use --engine uring");
        }
        // Each io_uring I/O carries its slot index across workers in 20 bits of its user_data.
        if self.engine == EngineKind::Uring && u64::from(self.jobs) * u64::from(self.qd) > 1 << 20 {
            bail!(
                "--jobs {} x --qd {} is more than the 1048576 I/Os in flight io_uring runs can number: lower one of them",
                self.jobs,
                self.qd
            );
        }
        if self.force_async && self.engine != EngineKind::Uring {
            bail!("--force-async is an io_uring option (IOSQE_ASYNC): use --engine uring");
        }
        if self.hipri && self.engine != EngineKind::Psync {
            bail!("--hipri is a psync option (preadv2 with RWF_HIPRI); for polled io_uring use --iopoll");
        }
        if self.hipri && !self.direct {
            bail!("--hipri needs O_DIRECT: polled completions exist only for direct I/O");
        }
        if self.fsync > 0 && self.fdatasync > 0 {
            bail!("--fsync and --fdatasync both ask for a sync call after every N writes: give one");
        }
        if (self.fsync > 0 || self.fdatasync > 0) && self.engine != EngineKind::Psync {
            bail!(
                "--fsync / --fdatasync issue the sync call between a psync job's writes (fio's fsync=N with a sync \
                 engine): use --engine psync (for io_uring and libaio writes that sync themselves, use --sync)"
            );
        }
        if (self.fsync > 0 || self.fdatasync > 0) && !self.rw.writes() {
            bail!(
                "--fsync / --fdatasync count writes, and --rw {} does none: use --rw write, randwrite or randrw",
                self.rw
            );
        }
        if self.sync && !self.rw.writes() {
            bail!("--sync opens the target O_SYNC, which only changes writes, and --rw {} does none", self.rw);
        }
        if self.iopoll && !self.direct {
            bail!("--iopoll needs O_DIRECT: polled completions exist only for direct I/O");
        }
        if self.verify && self.rw == Rw::Randrw {
            bail!("--verify checks a pure read or a pure write job: write with --rw write|randwrite, then read with --rw read|randread and the same --seed");
        }
        if matches!(self.target, Target::Device(_)) && self.rw.writes() && !self.allow_write {
            bail!(
                "--rw {} would write to {}: writing a raw device destroys its data. Add --allow-write if that device is yours to wipe",
                self.rw,
                self.target.path().display()
            );
        }
        Ok(())
    }

    /// A short name for folders and titles: `uring-randread-4k-qd32`.
    pub fn label(&self) -> String {
        format!("{}-{}-{}-qd{}", self.engine, self.rw, fmt_bytes(self.bs as u64).to_lowercase(), self.qd)
    }
}

/// Parses fio-style sizes: `4096`, `4k`, `4K`, `4KiB`, `1m`, `1G`, `2t`. Suffixes are powers of 1024.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if digits == 0 {
        return Err(format!("'{s}' is not a size: use a number with an optional k/m/g/t suffix, e.g. 4k or 1g"));
    }
    let n: u64 = t[..digits].parse().map_err(|_| format!("'{s}' is too large"))?;
    let shift = match t[digits..].to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => return Err(format!("'{s}': unknown size suffix '{other}' (use k, m, g or t)")),
    };
    n.checked_mul(1u64 << shift).ok_or_else(|| format!("'{s}' is too large"))
}

/// Parses durations: `10s`, `500ms`, `250us`, `2m`, `1h`; a bare number is seconds (as in fio).
/// Worker threads at most: 1024 x QD1 psync threads is already past what a 2-CPU machine
/// schedules evenly; 10000 took 23 s to set up for a 1 s run.
pub const MAX_JOBS: u32 = 1024;

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!("'{s}': a duration cannot be negative (use e.g. 10s, 500ms, 2m)"));
    }
    let digits = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    if digits == 0 {
        return Err(format!("'{s}' is not a duration: use e.g. 10s, 500ms, 2m"));
    }
    let n: f64 = t[..digits].parse().map_err(|_| format!("'{s}' is not a duration: use e.g. 10s, 500ms, 2m"))?;
    let secs = match &t[digits..] {
        "" | "s" => n,
        "ms" => n / 1e3,
        "us" => n / 1e6,
        "ns" => n / 1e9,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        other => return Err(format!("'{s}': unknown duration unit '{other}' (use ns, us, ms, s, m or h)")),
    };
    if !secs.is_finite() || secs > 1e9 {
        return Err(format!("'{s}' is too long"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses CPU lists as taskset does: `0`, `0-3`, `0,2,4-5`.
pub fn parse_cpus(s: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("'{s}' is not a CPU list: use e.g. 0, 0-3 or 0,2,4-5");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b {
                    return Err(bad());
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().map_err(|_| bad())?),
        }
    }
    if cpus.is_empty() {
        return Err(format!("'{s}' names no CPU"));
    }
    Ok(cpus)
}

/// `4096` -> `4K`, `1073741824` -> `1G`; exact binary units where they fit, bytes otherwise.
pub fn fmt_bytes(n: u64) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if n >= 1 << shift && n % (1 << shift) == 0 {
            return format!("{}{unit}", n >> shift);
        }
    }
    format!("{n}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert_eq!(parse_size("2T"), Ok(2 << 40));
        assert!(parse_size("k").is_err());
        assert!(parse_size("4q").unwrap_err().contains("suffix"));
        assert!(parse_size("-1").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("16777216t").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("10x").unwrap_err().contains("unit"));
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpus("0"), Ok(vec![0]));
        assert_eq!(parse_cpus("0-2,5"), Ok(vec![0, 1, 2, 5]));
        assert!(parse_cpus("3-1").is_err());
        assert!(parse_cpus("a").is_err());
        assert!(parse_cpus(",").is_err());
    }

    #[test]
    fn bytes_format() {
        assert_eq!(fmt_bytes(4096), "4K");
        assert_eq!(fmt_bytes(1 << 30), "1G");
        assert_eq!(fmt_bytes(1536), "1536");
    }
}
