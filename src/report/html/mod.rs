//! Self-contained HTML reports (nothing fetched: styles, plots and flamegraphs are inline) for a
//! trace, a sweep, a comparison of two runs or two sweeps, and a study (comparisons side by side). Each page reads top-down as a report: a summary card, the
//! phase breakdown, distributions and time series, per-I/O counts, flamegraphs at the page's
//! full width, and the configuration grouped. It prints (A4, sections kept whole). A script
//! checks on load that every chart rendered and has both axis labels, and measures each
//! flamegraph against the page, so a headless browser can tell a broken page from a good one;
//! with `#selftest` in the address it also searches and zooms each flamegraph.

mod compare;
mod parts;
mod study;
mod sweep;
mod sweep_compare;
mod trace;

pub use compare::{compare_page, Sides};
pub use parts::config_groups;
pub use study::{study_page, Column};
pub use sweep::{pct_name, sweep_charts, sweep_page};
pub use sweep_compare::{sweep_compare_charts, sweep_compare_page};
pub use trace::{trace_page, trace_page_sections};
