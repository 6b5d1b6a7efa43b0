//! Flamegraphs: kernel stack samples -> symbols -> folded stacks -> SVG; perf interop and
//! differential graphs. Only `symbolize` reads files (ELF, /proc/kallsyms) and `perf` runs perf;
//! folding, rendering and diffing are pure, and this module writes their output.

pub mod fold;
pub mod iopath_frames;
pub mod perf;
pub mod pprof;
pub mod render;
pub mod symbolize;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::model::RawStacks;

/// One written graph.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct Graph {
    pub folded: PathBuf,
    pub svg: PathBuf,
    /// Samples (on-CPU) or ns (off-CPU) in the graph.
    pub total: u64,
    pub stacks: usize,
    /// The frames with the largest inclusive share (process names left out), largest first.
    pub top_frames: Vec<(String, f64)>,
    /// The same stacks as a gzipped pprof profile (`--pprof`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pprof: Option<PathBuf>,
}

/// What `--flamegraph` / `--offcpu` wrote, for the report.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct FlameSummary {
    pub dir: PathBuf,
    pub freq_hz: u64,
    pub oncpu: Option<Graph>,
    pub offcpu: Option<Graph>,
    /// Named user frames per process.
    pub naming: Vec<symbolize::Naming>,
    pub kernel_named_fraction: f64,
    /// Samples lost to full BPF maps.
    pub dropped: u64,
}

/// `flamegraphs/<label>-<UTC time>`: a readable default folder for a run.
pub fn default_dir(label: &str) -> PathBuf {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    let clean: String = label.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    PathBuf::from("flamegraphs").join(format!(
        "{clean}-{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    ))
}

/// Days since 1970-01-01 -> (year, month, day), Howard Hinnant's algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Symbolizes, folds and renders the sampled stacks into `dir` (oncpu.* and offcpu.*), and with
/// `pprof` (the collection's length, ns) writes them as pprof profiles too (oncpu.pb.gz ...).
pub fn write_graphs(
    stacks: &RawStacks,
    dir: &Path,
    title: &str,
    subtitle: &str,
    pprof: Option<u64>,
) -> Result<FlameSummary> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let comms: std::collections::BTreeSet<String> =
        stacks.oncpu.iter().chain(&stacks.offcpu).map(|s| s.comm.clone()).collect();
    let one = |raw: &[crate::model::RawStack], name: &str, what: &str, count_name: &str| -> Result<(Graph, _)> {
        let mut sym = symbolize::symbolize(raw, &stacks.maps);
        if name == "offcpu" {
            fold::trim_kernel_below(&mut sym.stacks, "__schedule");
        }
        let lines = fold::fold(&sym.stacks);
        let folded = dir.join(format!("{name}.folded"));
        let mut text = Vec::new();
        fold::write(&lines, &mut text)?;
        // Temporary name, then renamed: a full disk leaves no partial picture (output.rs).
        crate::output::write_file(&folded, &text)?;
        let svg_path = dir.join(format!("{name}.svg"));
        let as_lines: Vec<String> = lines.iter().map(|(s, n)| format!("{s} {n}")).collect();
        let svg = if as_lines.is_empty() {
            empty_svg(&format!("{title} ({what}): no samples"))
        } else {
            render::svg(&as_lines, &render::Labels { title: &format!("{title} ({what})"), subtitle, count_name })?
        };
        crate::output::write_file(&svg_path, svg)?;
        let top_frames =
            fold::inclusive_shares(&lines).into_iter().filter(|(f, _)| !comms.contains(f)).take(20).collect();
        let total = lines.iter().map(|(_, n)| n).sum();
        let pprof = match pprof {
            Some(duration_ns) => {
                let kind = if name == "offcpu" {
                    pprof::Kind::OffCpu
                } else {
                    pprof::Kind::OnCpu { period_ns: 1_000_000_000 / stacks.freq_hz.max(1) }
                };
                let p = dir.join(format!("{name}.pb.gz"));
                crate::output::write_file(&p, pprof::profile(&lines, kind, duration_ns))?;
                Some(p)
            }
            None => None,
        };
        Ok((Graph { folded, svg: svg_path, total, stacks: lines.len(), top_frames, pprof }, sym))
    };
    let (oncpu, on_sym) = match stacks.oncpu.is_empty() && !stacks.offcpu.is_empty() {
        true => (None, None),
        false => {
            let (g, s) = one(&stacks.oncpu, "oncpu", "on-CPU", "samples")?;
            (Some(g), Some(s))
        }
    };
    let offcpu = if stacks.offcpu.is_empty() { None } else { Some(one(&stacks.offcpu, "offcpu", "off-CPU", "ns")?.0) };
    let (naming, kernel_named_fraction) = on_sym.map_or((Vec::new(), 1.0), |s| {
        let f = if s.kernel_frames == 0 { 1.0 } else { s.kernel_named as f64 / s.kernel_frames as f64 };
        (s.naming, f)
    });
    Ok(FlameSummary {
        dir: dir.to_owned(),
        freq_hz: stacks.freq_hz,
        oncpu,
        offcpu,
        naming,
        kernel_named_fraction,
        dropped: stacks.dropped,
    })
}

/// inferno refuses empty input; an empty run still gets a file that says so.
fn empty_svg(msg: &str) -> Vec<u8> {
    let msg = msg.replace('&', "&amp;").replace('<', "&lt;");
    format!(
        "<?xml version=\"1.0\" standalone=\"no\"?><svg version=\"1.1\" width=\"800\" height=\"60\" \
         xmlns=\"http://www.w3.org/2000/svg\"><text x=\"10\" y=\"35\">{msg}</text></svg>\n"
    )
    .into_bytes()
}

/// `iopath flamegraph --diff BEFORE AFTER`: the differential folded lines and SVG (red grew,
/// blue shrank, `before` normalised to `after`'s total).
pub fn write_diff(before: &Path, after: &Path, dir: &Path) -> Result<(PathBuf, PathBuf)> {
    let read = |p: &Path| -> Result<Vec<(String, u64)>> {
        let text = crate::input::read_text(p, crate::input::PERF_CAP, "a folded stack file")?;
        fold::parse(&text).with_context(|| format!("{} is not a folded stack file", p.display()))
    };
    let lines = render::differential(&read(before)?, &read(after)?)?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let folded = dir.join("diff.folded");
    crate::output::write_file(&folded, lines.iter().map(|l| format!("{l}\n")).collect::<String>())?;
    // Each side by its folder (".../before/oncpu.folded" -> "before"): whole paths ran past the
    // graph's width on a report page ("opath differential: tests/data/...").
    let name = |p: &Path| {
        let dir = p.parent().and_then(|d| d.file_name()).map(|d| d.to_string_lossy().into_owned());
        dir.filter(|d| !d.is_empty()).unwrap_or_else(|| p.display().to_string())
    };
    let (b, a) = match (name(before), name(after)) {
        (b, a) if b != a => (b, a),
        _ => (before.display().to_string(), after.display().to_string()),
    };
    let title = format!("iopath differential: {b} -> {a}");
    let svg = render::svg(
        &lines,
        &render::Labels {
            title: &title,
            subtitle: "red grew, blue shrank (before normalised to after's sample count)",
            count_name: "samples",
        },
    )?;
    let svg_path = dir.join("diff.svg");
    crate::output::write_file(&svg_path, svg)?;
    Ok((folded, svg_path))
}

/// `iopath flamegraph --perf-script FILE`: perf's stacks through inferno's collapser.
/// With the number of samples: a graph's `total` is the sum of perf's weights (each sample's
/// period, e.g. 62,124,248 for 31 samples), which is not a count of samples.
pub fn write_from_perf(input: &Path, dir: &Path) -> Result<(Graph, usize)> {
    let script = perf::read_input(input)?;
    let lines = perf::collapse(&script)?;
    let samples = perf::samples(&script)?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let folded = dir.join("perf.folded");
    let mut text = Vec::new();
    fold::write(&lines, &mut text)?;
    crate::output::write_file(&folded, &text)?;
    let as_lines: Vec<String> = lines.iter().map(|(s, n)| format!("{s} {n}")).collect();
    let title = format!("perf samples from {}", input.display());
    let svg =
        render::svg(&as_lines, &render::Labels { title: &title, subtitle: "via perf script", count_name: "weight" })?;
    let svg_path = dir.join("perf.svg");
    crate::output::write_file(&svg_path, svg)?;
    let g = Graph {
        folded,
        svg: svg_path,
        total: lines.iter().map(|(_, n)| n).sum(),
        pprof: None,
        stacks: lines.len(),
        top_frames: fold::inclusive_shares(&lines).into_iter().take(20).collect(),
    };
    Ok((g, samples))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_414), (2025, 11, 22));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
