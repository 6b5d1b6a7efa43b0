//! Folded stacks as a pprof profile (github.com/google/pprof proto/profile.proto, gzipped), the
//! format `go tool pprof`, Pyroscope and Parca read. Pure: folded lines in, bytes out. The few
//! messages it needs are written with crate::pb (a dozen fields; no code generator in the build).
//!
//! Each folded line `comm;user...;kernel_[k]` becomes one sample: its locations leaf first, one
//! function per distinct frame name. Kernel frames (FlameGraph's `_[k]` mark) are named without
//! the mark and belong to the `[kernel.kallsyms]` mapping (perf's name for it), user frames to
//! `[user]`; the process name is a label (`comm`), not a frame.

use std::collections::HashMap;
use std::io::Write;

use crate::pb::Pb;

/// What the values are.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    /// Sampled on-CPU stacks at this period: values (samples, cpu nanoseconds).
    OnCpu { period_ns: u64 },
    /// Blocked time: values (off-CPU nanoseconds).
    OffCpu,
}

#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, u64>,
}

impl Strings {
    fn new() -> Strings {
        let mut s = Strings::default();
        s.id("");
        s
    }
    fn id(&mut self, v: &str) -> u64 {
        if let Some(i) = self.index.get(v) {
            return *i;
        }
        let i = self.table.len() as u64;
        self.table.push(v.to_owned());
        self.index.insert(v.to_owned(), i);
        i
    }
}

fn value_type(s: &mut Strings, ty: &str, unit: &str) -> Pb {
    let mut m = Pb::default();
    m.uint(1, s.id(ty));
    m.uint(2, s.id(unit));
    m
}

const KERNEL_MAPPING: u64 = 1;
const USER_MAPPING: u64 = 2;

/// The profile, gzipped. `duration_ns`: how long the stacks were collected.
pub fn profile(lines: &[(String, u64)], kind: Kind, duration_ns: u64) -> Vec<u8> {
    let mut s = Strings::new();
    let mut out = Pb::default();
    match kind {
        Kind::OnCpu { .. } => {
            out.msg(1, value_type(&mut s, "samples", "count"));
            out.msg(1, value_type(&mut s, "cpu", "nanoseconds"));
        }
        Kind::OffCpu => out.msg(1, value_type(&mut s, "offcpu", "nanoseconds")),
    }
    // Locations: one per (frame name, kernel or not); its function the same.
    let mut locs: HashMap<(String, bool), u64> = HashMap::new();
    let mut loc_msgs = Vec::new();
    let comm_key = s.id("comm");
    for (line, n) in lines {
        let mut frames = line.split(';');
        let comm = frames.next().unwrap_or("");
        let mut ids: Vec<u64> = frames
            .map(|f| {
                let (name, kernel) = match f.strip_suffix("_[k]") {
                    Some(k) => (k, true),
                    None => (f, false),
                };
                let next = locs.len() as u64 + 1;
                *locs.entry((name.to_owned(), kernel)).or_insert_with(|| {
                    loc_msgs.push((next, name.to_owned(), kernel));
                    next
                })
            })
            .collect();
        // pprof lists a sample's locations leaf first.
        ids.reverse();
        let mut sample = Pb::default();
        sample.packed(1, &ids);
        let values = match kind {
            Kind::OnCpu { period_ns } => vec![*n, n * period_ns],
            Kind::OffCpu => vec![*n],
        };
        sample.packed(2, &values);
        let mut label = Pb::default();
        label.uint(1, comm_key);
        label.uint(2, s.id(comm));
        sample.msg(3, label);
        out.msg(2, sample);
    }
    for (id, file) in [(KERNEL_MAPPING, "[kernel.kallsyms]"), (USER_MAPPING, "[user]")] {
        let mut m = Pb::default();
        m.uint(1, id);
        m.uint(5, s.id(file));
        m.uint(7, 1); // has_functions: already symbolized
        out.msg(3, m);
    }
    for (id, _, kernel) in &loc_msgs {
        let mut line = Pb::default();
        line.uint(1, *id);
        let mut l = Pb::default();
        l.uint(1, *id);
        l.uint(2, if *kernel { KERNEL_MAPPING } else { USER_MAPPING });
        // No addresses are kept (frames are named in the kernel and at the run's end): a
        // location's id stands in, so no two share one.
        l.uint(3, *id);
        l.msg(4, line);
        out.msg(4, l);
    }
    for (id, name, kernel) in &loc_msgs {
        let mut f = Pb::default();
        f.uint(1, *id);
        f.uint(2, s.id(name));
        f.uint(3, s.id(name));
        f.uint(4, s.id(if *kernel { "[kernel.kallsyms]" } else { "[user]" }));
        out.msg(5, f);
    }
    for t in std::mem::take(&mut s.table) {
        out.bytes(6, t.as_bytes());
    }
    out.uint(10, duration_ns);
    let period_type = match kind {
        Kind::OnCpu { .. } => ("cpu", "nanoseconds"),
        Kind::OffCpu => ("offcpu", "nanoseconds"),
    };
    // The string table is already written: these two names are in it (the sample types').
    let mut pt = Pb::default();
    pt.uint(1, s.index[period_type.0]);
    pt.uint(2, s.index[period_type.1]);
    out.msg(11, pt);
    if let Kind::OnCpu { period_ns } = kind {
        out.uint(12, period_ns);
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing to a Vec cannot fail.
    let _ = gz.write_all(&out.0);
    gz.finish().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn varint(b: &[u8], i: &mut usize) -> u64 {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let x = b[*i];
            *i += 1;
            v |= ((x & 0x7f) as u64) << shift;
            if x < 0x80 {
                return v;
            }
            shift += 7;
        }
    }

    /// Top-level fields: (field, wire, value or bytes).
    fn fields(b: &[u8]) -> Vec<(u64, Vec<u8>, u64)> {
        let mut i = 0;
        let mut out = Vec::new();
        while i < b.len() {
            let k = varint(b, &mut i);
            match k & 7 {
                0 => out.push((k >> 3, Vec::new(), varint(b, &mut i))),
                2 => {
                    let n = varint(b, &mut i) as usize;
                    out.push((k >> 3, b[i..i + n].to_vec(), 0));
                    i += n;
                }
                w => panic!("wire type {w}"),
            }
        }
        out
    }

    #[test]
    fn a_profile_has_its_strings_samples_and_kernel_frames() {
        let lines = vec![
            ("fio;main;io_submit;__x64_sys_io_submit_[k];blk_mq_submit_bio_[k]".to_owned(), 30),
            ("fio;main;io_getevents;schedule_[k]".to_owned(), 10),
        ];
        let gz = profile(&lines, Kind::OnCpu { period_ns: 1_003_009 }, 2_000_000_000);
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut raw).unwrap();
        let f = fields(&raw);
        let strings: Vec<String> =
            f.iter().filter(|x| x.0 == 6).map(|x| String::from_utf8(x.1.clone()).unwrap()).collect();
        assert_eq!(strings[0], "");
        for s in ["cpu", "nanoseconds", "comm", "fio", "blk_mq_submit_bio", "[kernel.kallsyms]", "main"] {
            assert!(strings.iter().any(|x| x == s), "{s} in {strings:?}");
        }
        assert!(!strings.iter().any(|x| x.contains("_[k]")), "the mark is not in a name");
        assert_eq!(f.iter().filter(|x| x.0 == 2).count(), 2, "two samples");
        assert_eq!(f.iter().filter(|x| x.0 == 4).count(), 6, "one location per distinct frame");
        assert_eq!(f.iter().find(|x| x.0 == 12).map(|x| x.2), Some(1_003_009));
        // The first sample: 4 locations leaf first (blk_mq_submit_bio is the 4th made, id 4),
        // values 30 samples and 30 x period ns.
        let s1 = fields(&f.iter().find(|x| x.0 == 2).unwrap().1);
        let mut i = 0;
        let locs: Vec<u64> = std::iter::from_fn(|| (i < s1[0].1.len()).then(|| varint(&s1[0].1, &mut i))).collect();
        assert_eq!(locs, vec![4, 3, 2, 1]);
        let mut i = 0;
        let vals: Vec<u64> = std::iter::from_fn(|| (i < s1[1].1.len()).then(|| varint(&s1[1].1, &mut i))).collect();
        assert_eq!(vals, vec![30, 30 * 1_003_009]);
    }
}
