//! The terminal UI (ratatui): the frame's table with a header line, keys to sort, group and
//! scroll; refreshed every interval, redrawn at once on a key. The terminal is restored on
//! every exit (q, Ctrl-C, SIGTERM, an error: Drop).

use std::time::{Duration, Instant};

use anyhow::Result;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style, Stylize};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Row, Table, TableState};
use ratatui::DefaultTerminal;

use super::table::{self, GroupBy, Snapshot, SortBy};

pub struct Tui {
    term: DefaultTerminal,
    by: GroupBy,
    sort: SortBy,
    state: TableState,
    /// The last two reads, to redraw on a key without waiting for the next refresh.
    last: Option<(Snapshot, Snapshot)>,
}

impl Tui {
    pub fn start(by: GroupBy, sort: SortBy) -> Result<Tui> {
        let term = ratatui::try_init()?;
        let mut t = Tui { term, by, sort, state: TableState::default(), last: None };
        t.draw()?;
        Ok(t)
    }

    /// Handles keys until `deadline`; false when the user quit.
    pub fn wait_until(&mut self, deadline: Instant) -> Result<bool> {
        loop {
            if crate::stop::requested() {
                return Ok(false);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(true);
            }
            if !event::poll((deadline - now).min(Duration::from_millis(100)))? {
                continue;
            }
            let Event::Key(k) = event::read()? else { continue };
            if k.kind != KeyEventKind::Press {
                continue;
            }
            match k.code {
                KeyCode::Char('q') | KeyCode::Esc => return Ok(false),
                KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => return Ok(false),
                KeyCode::Char('s') => self.sort = self.sort.next(),
                KeyCode::Char('c') => {
                    self.by = match self.by {
                        GroupBy::Process => GroupBy::Cgroup,
                        GroupBy::Cgroup => GroupBy::Pod,
                        GroupBy::Pod => GroupBy::Process,
                    }
                }
                KeyCode::Down | KeyCode::Char('j') => self.state.select_next(),
                KeyCode::Up | KeyCode::Char('k') => self.state.select_previous(),
                _ => continue,
            }
            self.draw()?;
        }
    }

    pub fn show(&mut self, prev: &Snapshot, cur: &Snapshot) -> Result<()> {
        self.last = Some((prev.clone(), cur.clone()));
        self.draw()
    }

    fn draw(&mut self) -> Result<()> {
        let f = match &self.last {
            Some((a, b)) => table::frame(a, b, self.by, self.sort),
            None => table::Frame::default(),
        };
        let (by, sort) = (self.by, self.sort);
        let state = &mut self.state;
        self.term.draw(|fr| {
            // The one-hook tier's lines (how each disk's phases are timed) under the header.
            let stamps = f.stamps.len() as u16;
            let [head, tier, body, keys] = Layout::vertical([
                Constraint::Length(1),
                Constraint::Length(stamps),
                Constraint::Min(1),
                Constraint::Length(1),
            ])
            .areas(fr.area());
            let lost: u64 = f.lost.values().sum();
            let mut h = format!(
                "iopath top: {:.0} IOPS, {} rows by {}, sorted by {}",
                f.ios as f64 / f.dur_s.max(1e-9),
                f.rows.len(),
                by.name(),
                sort.name()
            );
            if let Some(ns) = f.bpf_ns_per_io {
                h.push_str(&format!(", BPF {ns:.0} ns per I/O"));
            }
            if f.dur_s == 0.0 {
                h = "iopath top: first refresh in progress ...".into();
            } else if lost > 0 {
                h.push_str(&format!("  NOT COUNTED {lost}"));
            }
            fr.render_widget(Paragraph::new(Line::from(h).bold()), head);
            if stamps > 0 {
                let lines: Vec<Line> =
                    f.stamps.iter().map(|l| Line::from(format!("one hook, no process (--phases): {l}"))).collect();
                fr.render_widget(Paragraph::new(lines), tier);
            }
            let rows: Vec<Row> = f.rows.iter().map(|r| Row::new(table::cells(r))).collect();
            let widths = table::WIDTHS.map(|w| Constraint::Length(w as u16));
            let t = Table::new(rows, widths)
                .header(Row::new(table::HEADER).style(Style::new().add_modifier(Modifier::REVERSED)))
                .row_highlight_style(Style::new().add_modifier(Modifier::BOLD));
            fr.render_stateful_widget(t, body, state);
            fr.render_widget(
                Paragraph::new(
                    "q quit  s sort  c process/cgroup  up/down select   latencies p50/p99 (u=us, m=ms), - = none",
                ),
                keys,
            );
        })?;
        Ok(())
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        ratatui::restore();
    }
}
