//! Folded stacks -> SVG with inferno, I/O-path frames coloured by family (a CSS class per frame
//! name, so the colours survive inferno's own palette) and the run summarised in the title.

use std::collections::BTreeSet;
use std::io::Cursor;

use anyhow::{Context, Result};
use inferno::flamegraph::color::{BasicPalette, Palette};
use inferno::flamegraph::{self, FuncFrameAttrsMap, Options};

use super::iopath_frames::{family, Family};

/// What the graph is of: its title, a subtitle line, and what a count means.
pub struct Labels<'a> {
    pub title: &'a str,
    pub subtitle: &'a str,
    /// "samples" (on-CPU) or "ns" (off-CPU).
    pub count_name: &'a str,
}

/// The SVG of `lines` (folded, or differential folded with two counts).
pub fn svg(lines: &[String], labels: &Labels) -> Result<Vec<u8>> {
    let mut opts = Options::default();
    opts.title = labels.title.to_owned();
    let legend: Vec<String> = Family::ALL.iter().map(|f| format!("{}={}", colour_name(*f), f.label())).collect();
    opts.subtitle = Some(format!("{} | {}", labels.subtitle, legend.join(" ")));
    // Pale yellow for everything else, so the I/O-path colours stand out (the default "hot"
    // palette would paint ordinary frames as red as an IOMMU's).
    opts.colors = Palette::Basic(BasicPalette::Yellow);
    opts.count_name = labels.count_name.to_owned();
    opts.func_frameattrs = frame_classes(lines)?;
    let mut out = Vec::new();
    flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut out)
        .context("rendering the flamegraph")?;
    Ok(inject_style(out))
}

fn colour_name(f: Family) -> &'static str {
    match f {
        Family::IoUring => "green",
        Family::Aio => "teal",
        Family::Block => "blue",
        Family::Driver => "purple",
        Family::IommuDma => "red",
    }
}

/// `class=` attributes for every frame name of an I/O-path family.
fn frame_classes(lines: &[String]) -> Result<FuncFrameAttrsMap> {
    let mut names = BTreeSet::new();
    for l in lines {
        // Frame names may contain spaces ("<X as Y>::f"): only trailing counts are cut off.
        let mut stack = l.as_str();
        while let Some((head, tail)) = stack.rsplit_once(' ') {
            if !tail.chars().all(|c| c.is_ascii_digit()) {
                break;
            }
            stack = head;
        }
        for f in stack.split(';') {
            names.insert(f);
        }
    }
    let mut spec = String::new();
    for n in names {
        if let Some(fam) = family(n) {
            spec.push_str(&format!("{n}\tclass={}\n", fam.class()));
        }
    }
    FuncFrameAttrsMap::from_reader(Cursor::new(spec)).context("building the frame attributes")
}

/// A style sheet right after the <svg> tag: CSS outranks the rects' fill attributes.
fn inject_style(svg: Vec<u8>) -> Vec<u8> {
    let text = String::from_utf8_lossy(&svg).into_owned();
    let Some(open) = text.find("<svg") else { return svg };
    let Some(end) = text[open..].find('>') else { return svg };
    let at = open + end + 1;
    let mut css = String::from("<style type=\"text/css\">");
    for f in Family::ALL {
        css.push_str(&format!(" g.{} > rect {{ fill: {}; }}", f.class(), f.color()));
    }
    css.push_str(" </style>");
    let mut out = String::with_capacity(text.len() + css.len());
    out.push_str(&text[..at]);
    out.push_str(&css);
    out.push_str(&text[at..]);
    out.into_bytes()
}

/// Differential folded lines (`stack before after`), `before` scaled to `after`'s total so that
/// colour shows change of share, not of load: red grew, blue shrank (FlameGraph's difffolded).
pub fn differential(before: &[(String, u64)], after: &[(String, u64)]) -> Result<Vec<String>> {
    let as_text = |v: &[(String, u64)]| v.iter().map(|(s, n)| format!("{s} {n}\n")).collect::<String>();
    let opts = inferno::differential::Options { normalize: true, strip_hex: false };
    let mut out = Vec::new();
    inferno::differential::from_readers(opts, Cursor::new(as_text(before)), Cursor::new(as_text(after)), &mut out)
        .context("computing the differential stacks")?;
    Ok(String::from_utf8_lossy(&out).lines().map(str::to_owned).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_has_title_and_io_path_classes() {
        let lines = vec![
            "iopath;main;__x64_sys_io_uring_enter_[k];io_submit_sqes_[k];blk_mq_submit_bio_[k] 7".to_string(),
            "iopath;main;__iommu_dma_map_[k] 3".to_string(),
        ];
        let svg = svg(&lines, &Labels { title: "iopath on-CPU: uring qd32", subtitle: "test", count_name: "samples" })
            .unwrap();
        let s = String::from_utf8(svg).unwrap();
        assert!(s.contains("iopath on-CPU: uring qd32"));
        assert!(s.contains("class=\"iop-uring\""), "io_uring frames are classed");
        assert!(s.contains("class=\"iop-block\""));
        assert!(s.contains("class=\"iop-iommu\""));
        assert!(s.contains("g.iop-iommu > rect { fill: #e15759; }"));
        assert!(s.contains("blk_mq_submit_bio"));
    }

    #[test]
    fn differential_normalizes_and_keeps_both_counts() {
        let before = vec![("a;b".to_string(), 10), ("a;c".to_string(), 10)];
        let after = vec![("a;b".to_string(), 60), ("a;c".to_string(), 20)];
        let d = differential(&before, &after).unwrap();
        // before scaled to after's total (80): b 40 -> 60 grew, c 40 -> 20 shrank.
        assert!(d.contains(&"a;b 40 60".to_string()), "{d:?}");
        assert!(d.contains(&"a;c 40 20".to_string()), "{d:?}");
        let svg = String::from_utf8(svg(&d, &Labels { title: "diff", subtitle: "", count_name: "samples" }).unwrap())
            .unwrap();
        assert!(svg.contains("rgb(") && svg.contains("a"));
    }
}
