//! The pieces every page is built from: the page itself (styles, the self-check script), cards,
//! tables, the grouped configuration, flamegraph frames, escaping.

use std::collections::BTreeMap;
use std::fmt::Write;

pub(super) fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

const STYLE: &str = r#"
* { box-sizing: border-box; }
body { font-family: sans-serif; margin: 0; color: #222; background: #fafafa; }
main { max-width: 1168px; margin: 0 auto; padding: 20px 24px; background: #fff; }
h1 { font-size: 21px; margin: 4px 0 2px; } h2 { font-size: 16px; margin: 26px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 13px; margin: 14px 0 6px; }
p { font-size: 13px; line-height: 1.45; }
.sub { color: #555; font-size: 13px; margin: 0 0 14px; }
.card { display: grid; grid-template-columns: repeat(4, 1fr); gap: 10px; border: 1px solid #ccd; border-radius: 6px; padding: 12px; background: #f5f7fb; }
.card .f { min-width: 0; } .card .k { font-size: 11px; color: #667; text-transform: uppercase; letter-spacing: .04em; }
.card .v { font-size: 15px; margin-top: 2px; overflow-wrap: anywhere; } .card .big { font-size: 24px; font-weight: bold; }
.card .wide { grid-column: span 2; } .card .full { grid-column: 1 / -1; }
.ok { color: #2a7a2a; } .bad { color: #b22; } .warn { color: #8a5a00; }
ul.warnings { margin: 4px 0 0; padding-left: 18px; font-size: 13px; }
table { border-collapse: collapse; font-size: 12px; margin: 6px 0; }
td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f0f0f0; } td.k { text-align: left; font-family: monospace; }
table.kv td { text-align: left; }
.plots { display: flex; flex-wrap: wrap; gap: 8px; }
svg.plot { max-width: 100%; height: auto; display: block; }
.note { color: #a33; }
iframe.flame { display: block; width: 100%; border: 1px solid #ccc; }
.groups { display: block; } .group table { max-width: 100%; } .group td { overflow-wrap: anywhere; }
@page { size: A4; margin: 10mm; }
@media print {
  body { background: #fff; } main { max-width: none; padding: 0; }
  h2 { break-after: avoid; } .card, svg.plot, table, .flamebox, .group { break-inside: avoid; }
  .flamebox { break-before: page; }
}
"#;

/// On load: every chart has a size and both axis labels; each flamegraph's width against the
/// page's content; with #selftest, a search and a zoom in each flamegraph.
const CHECK: &str = r#"
window.addEventListener('error', function (e) { document.documentElement.setAttribute('data-error', String(e.message)); });
window.addEventListener('load', function () {
  var plots = document.querySelectorAll('svg.plot'), ok = 0, unlabelled = 0;
  for (var i = 0; i < plots.length; i++) {
    var b = plots[i].getBBox(); if (b.width > 0 && b.height > 0) ok++;
    var x = plots[i].querySelector('.xlabel'), y = plots[i].querySelector('.ylabel');
    if (!x || !y || !x.textContent.trim() || !y.textContent.trim()) unlabelled++;
  }
  document.body.setAttribute('data-plots', ok + '/' + plots.length);
  document.body.setAttribute('data-unlabelled', String(unlabelled));
  setTimeout(function () {
    var main = document.querySelector('main'), cs = getComputedStyle(main);
    var content = main.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    var out = [];
    document.querySelectorAll('iframe.flame').forEach(function (f) {
      var d = f.contentDocument, svg = d && d.querySelector('svg');
      var w = svg ? svg.getBoundingClientRect().width : 0, r = w + '/' + content;
      if (svg && location.hash === '#selftest') {
        var win = f.contentWindow, frames = d.querySelectorAll('#frames > g');
        win.search('blk|io_uring|read');
        var matched = d.getElementById('matched').textContent;
        win.reset_search();
        var before = d.querySelectorAll('#frames > g.hide').length;
        if (frames.length > 1) win.zoom(frames[frames.length - 1]);
        var hidden = d.querySelectorAll('#frames > g.hide').length;
        win.unzoom();
        r += ' search=' + (matched.indexOf('Matched') >= 0 ? 'ok' : 'none') + ' zoom=' + (hidden > before ? 'ok' : 'none');
      }
      out.push(r);
    });
    document.body.setAttribute('data-flames', out.join(';'));
  }, 300);
});
"#;

pub(super) fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\n<style>{STYLE}</style>\n\
         <script>{CHECK}</script></head>\n<body><main>\n<h1>{t}</h1>\n{body}\n</main></body></html>\n",
        t = esc(title)
    )
}

pub(super) fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = String::from("<table><tr>");
    for h in head {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("</tr>");
    for r in rows {
        s.push_str("<tr>");
        for (i, c) in r.iter().enumerate() {
            let _ = write!(s, "<td{}>{}</td>", if i == 0 { " class=\"k\"" } else { "" }, esc(c));
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>");
    s
}

/// A settings table: values read left to right, as text.
pub(super) fn kv_table(head: &[&str], rows: &[Vec<String>]) -> String {
    table(head, rows).replacen("<table>", "<table class=\"kv\">", 1)
}

/// What differs between two sides' configurations, a row per setting ("none" when nothing
/// does), under the caller's heading.
pub(super) fn config_changes(heading: &str, changes: &[crate::compare::ConfigChange], sides: (&str, &str)) -> String {
    let mut s = heading.to_owned();
    if changes.is_empty() {
        s.push_str("<p>none</p>");
    } else {
        let rows: Vec<Vec<String>> =
            changes.iter().map(|x| vec![x.key.clone(), x.before.clone(), x.after.clone()]).collect();
        s.push_str(&kv_table(&["setting", sides.0, sides.1], &rows));
    }
    s
}

/// One field of a summary card: its key, its value (HTML), and how wide it is.
pub(super) struct Field<'a> {
    pub(super) key: &'a str,
    pub(super) value: String,
    pub(super) class: &'static str,
}

pub(super) fn field(key: &'static str, value: String) -> Field<'static> {
    Field { key, value, class: "" }
}

pub(super) fn card(fields: &[Field]) -> String {
    let mut s = String::from("<section class=\"card\" id=\"summary\">");
    for f in fields {
        let _ = write!(
            s,
            "<div class=\"f {}\"><div class=\"k\">{}</div><div class=\"v\">{}</div></div>",
            f.class,
            esc(f.key),
            f.value
        );
    }
    s.push_str("</section>");
    s
}

/// Warnings as a list, or "none".
pub(super) fn warnings_html(w: &[String]) -> String {
    if w.is_empty() {
        return "<span class=\"ok\">none</span>".into();
    }
    let mut s = String::from("<ul class=\"warnings\">");
    for x in w {
        let _ = write!(s, "<li class=\"warn\">{}</li>", esc(x));
    }
    s.push_str("</ul>");
    s
}

/// A flamegraph (inferno's interactive SVG) in a frame of its own, at the page's full width:
/// its script keeps global state, so two graphs cannot share one document. Inferno draws
/// "fluid" (it drops the SVG's width and sizes to its parent), and an inline SVG with no width
/// in an HTML document is 300 px wide, which is how the frames read "..e": the frame's document
/// makes it a block at 100%. Its height is the SVG's own.
pub(super) fn flame_frame(title: &str, svg: &str) -> String {
    let body = svg.find("<svg").map_or(svg, |i| &svg[i..]);
    let height = body
        .split_once("height=\"")
        .and_then(|(_, r)| r.split('"').next())
        .and_then(|h| h.parse::<f64>().ok())
        .unwrap_or(600.0);
    // Inferno keeps the zoom and search in the address (history.replaceState), which a frame
    // with no address of its own (srcdoc, origin null under file://) refuses with a
    // SecurityError: every click and search failed that way. Kept, but never fatal.
    let doc = format!(
        "<!DOCTYPE html><html><head><style>html,body{{margin:0;overflow:hidden}}svg{{display:block;width:100%}}</style>\
         <script>(function(){{var r=history.replaceState.bind(history);history.replaceState=function(){{try{{r.apply(null,arguments)}}catch(e){{}}}};}})();</script>\
         </head><body>{body}</body></html>"
    );
    format!(
        "<div class=\"flamebox\"><h2>{}</h2><p>Click a frame to zoom, Ctrl-F or the Search button (top right) to highlight \
         frames by name.</p><iframe class=\"flame\" title=\"{}\" style=\"height:{:.0}px\" srcdoc=\"{}\"></iframe></div>",
        esc(title),
        esc(title),
        height + 2.0,
        esc(&doc)
    )
}

/// The configuration grouped the way a reader looks for it: the kernel, the IOMMU, the disks
/// and their queues (one row per disk), the CPUs, cgroup limits, page-cache writeback; keys
/// this table does not know go to "other".
pub fn config_groups(config: &serde_json::Value) -> String {
    const GROUPS: [(&str, &[&str]); 6] = [
        ("Kernel", &["kernel", "cmdline", "mitigations"]),
        ("IOMMU", &["iommu"]),
        ("Disks and queues", &["devices", "nvme_poll_queues"]),
        ("CPU", &["cpus", "cpu_model", "governor"]),
        ("cgroup", &["cgroup"]),
        ("Page-cache writeback", &["vm_dirty"]),
    ];
    let Some(obj) = config.as_object() else { return "<p>none recorded</p>".into() };
    let mut s = String::from("<div class=\"groups\">");
    let known: Vec<&str> = GROUPS.iter().flat_map(|g| g.1.iter().copied()).collect();
    let other: Vec<&str> = obj.keys().map(String::as_str).filter(|k| !known.contains(k)).collect();
    for (name, keys) in GROUPS.iter().map(|(n, k)| (*n, k.to_vec())).chain(std::iter::once(("Other", other))) {
        let present: Vec<&str> = keys.into_iter().filter(|k| obj.get(*k).is_some_and(|v| !v.is_null())).collect();
        if present.is_empty() {
            continue;
        }
        let _ = write!(s, "<div class=\"group\"><h3>{name}</h3>");
        let mut flat = BTreeMap::new();
        for k in present {
            let v = &obj[k];
            match v.as_array() {
                // A list of objects (the disks): one column each, one row per setting (narrow
                // enough to print: one row per disk ran off an A4 page at 14 settings).
                Some(a) if !a.is_empty() && a.iter().all(|x| x.is_object()) => {
                    let mut keys: Vec<String> = Vec::new();
                    for x in a {
                        for c in x.as_object().into_iter().flat_map(|o| o.keys()) {
                            if !keys.contains(c) && c != "name" {
                                keys.push(c.clone());
                            }
                        }
                    }
                    let names: Vec<String> = a
                        .iter()
                        .enumerate()
                        .map(|(i, x)| x["name"].as_str().map_or(format!("#{i}"), str::to_owned))
                        .collect();
                    let head: Vec<&str> = std::iter::once("setting").chain(names.iter().map(String::as_str)).collect();
                    let rows: Vec<Vec<String>> = keys
                        .iter()
                        .map(|c| std::iter::once(c.clone()).chain(a.iter().map(|x| scalar(&x[c.as_str()]))).collect())
                        .collect();
                    s.push_str(&kv_table(&head, &rows));
                }
                _ => flatten(k, v, &mut flat),
            }
        }
        if !flat.is_empty() {
            let rows: Vec<Vec<String>> = flat.into_iter().map(|(k, v)| vec![k, v]).collect();
            s.push_str(&kv_table(&["setting", "value"], &rows));
        }
        s.push_str("</div>");
    }
    s.push_str("</div>");
    s
}

pub(super) fn scalar(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "unknown".into(),
        other => other.to_string(),
    }
}

pub(super) fn flatten(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, String>) {
    let key = |k: &str| if prefix.is_empty() { k.to_owned() } else { format!("{prefix}.{k}") };
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                flatten(&key(k), x, out);
            }
        }
        serde_json::Value::Array(a) if a.iter().all(|x| x.get("name").is_some()) && !a.is_empty() => {
            for x in a {
                flatten(&key(x["name"].as_str().unwrap_or("?")), x, out);
            }
        }
        serde_json::Value::Array(a) if a.iter().all(|x| x.is_string()) => {
            let items: Vec<&str> = a.iter().filter_map(|x| x.as_str()).collect();
            out.insert(prefix.to_owned(), if items.is_empty() { "none".into() } else { items.join("; ") });
        }
        other => {
            out.insert(prefix.to_owned(), scalar(other));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_is_grouped_with_one_column_per_disk() {
        let c = serde_json::json!({
            "kernel": "6.1.0",
            "iommu": {"mode": "strict", "cmdline": ["iommu.strict=1"]},
            "devices": [{"name": "vda", "scheduler": "mq-deadline"}, {"name": "nvme0n1", "scheduler": "none"}],
            "something_new": 3
        });
        let h = config_groups(&c);
        let at = |s: &str| h.find(s).unwrap_or_else(|| panic!("{s} in {h}"));
        assert!(at("<h3>Kernel</h3>") < at("<h3>IOMMU</h3>") && at("<h3>IOMMU</h3>") < at("<h3>Disks and queues</h3>"));
        assert!(
            h.contains("<th>nvme0n1</th>")
                && h.contains("<td class=\"k\">scheduler</td><td>mq-deadline</td><td>none</td>"),
            "{h}"
        );
        assert!(h.contains("iommu.cmdline</td><td>iommu.strict=1"), "{h}");
        assert!(h.contains("<h3>Other</h3>") && h.contains("something_new"));
    }

    #[test]
    fn the_flamegraph_fills_its_frame() {
        let f = flame_frame("On-CPU", "<?xml version=\"1.0\"?><svg width=\"1200\" height=\"606\"></svg>");
        assert!(f.contains("style=\"height:608px\"") && f.contains("svg{display:block;width:100%}"), "{f}");
        assert!(!f.contains("&lt;?xml"), "the XML prolog is not HTML");
    }
}
