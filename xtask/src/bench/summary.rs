//! The comparison of our measurements with their peers', and its markdown table.
//!
//! The ratio is the peer's time over ours, so a value above 1 means ours is faster (it is our
//! throughput over the peer's). It is taken per repeat, between the two runs that were
//! interleaved in that repeat, and summarised by its median and range, so a slow moment of a
//! shared machine affects both sides of one ratio rather than one side of all of them.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::catalogue;
use super::record::{Record, Side, Spread};

/// One of our measurements over all repeats.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    /// Its id.
    pub id: String,
    /// What one unit of work is.
    pub unit: String,
    /// Seconds per unit over the repeats.
    pub seconds: Spread,
    /// Peak resident memory in MB (median over repeats) where the bench reports it.
    pub peak_rss_mb: Option<f64>,
}

/// A peer's measurement next to ours.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// Our measurement's id.
    pub ours: String,
    /// The peer's measurement id.
    pub peer_id: String,
    /// The peer library (and version).
    pub peer: String,
    /// What one unit of work is (ours).
    pub unit: String,
    /// Our seconds per unit.
    pub ours_seconds: Spread,
    /// The peer's seconds per unit.
    pub peer_seconds: Spread,
    /// Peer time / our time per repeat: above 1, ours is faster.
    pub ratio: Spread,
    /// Peak resident memory in MB, ours and the peer's, where reported.
    pub peak_rss_mb: [Option<f64>; 2],
    /// Why the peer is faster, where it is and the reason is known.
    pub explanation: Option<String>,
}

/// Everything the records say, grouped.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Our measurements, in the order they first appeared.
    pub ours: Vec<Measured>,
    /// Each peer measurement next to the one of ours it mirrors.
    pub comparisons: Vec<Comparison>,
    /// Peer measurements whose `ours` id no bench of ours reported (a renamed workload).
    pub unmatched: Vec<String>,
}

/// Median of the `peak_rss_mb` details of `records`.
fn peak(records: &[&Record]) -> Option<f64> {
    let values: Vec<f64> = records
        .iter()
        .filter_map(|r| r.details.get("peak_rss_mb").and_then(|v| v.as_f64()))
        .collect();
    Spread::of(&values).map(|s| s.median)
}

/// Groups `records` by id, keeping first-appearance order.
fn by_id(records: &[Record], side: Side) -> Vec<(String, Vec<&Record>)> {
    let mut groups: Vec<(String, Vec<&Record>)> = Vec::new();
    for r in records.iter().filter(|r| r.side == side) {
        match groups.iter_mut().find(|(id, _)| *id == r.id) {
            Some((_, g)) => g.push(r),
            None => groups.push((r.id.clone(), vec![r])),
        }
    }
    groups
}

/// Summarises the records of a run.
pub fn summarise(records: &[Record]) -> Summary {
    let ours_groups = by_id(records, Side::Ours);
    let ours: Vec<Measured> = ours_groups
        .iter()
        .map(|(id, g)| {
            let times: Vec<f64> = g.iter().map(|r| r.seconds).collect();
            Measured {
                id: id.clone(),
                unit: g[0].unit.clone(),
                seconds: Spread::of(&times).expect("a group has a record"),
                peak_rss_mb: peak(g),
            }
        })
        .collect();
    let mut comparisons = Vec::new();
    let mut unmatched = Vec::new();
    for (peer_id, group) in by_id(records, Side::Peer) {
        let ours_id = group[0].ours.clone().expect("parse requires ours on peer lines");
        let Some((_, ours_group)) = ours_groups.iter().find(|(id, _)| *id == ours_id) else {
            unmatched.push(format!("{peer_id} (mirrors {ours_id})"));
            continue;
        };
        let ours_by_repeat: BTreeMap<usize, f64> = ours_group.iter().map(|r| (r.repeat, r.seconds)).collect();
        let ratios: Vec<f64> = group
            .iter()
            .filter_map(|p| ours_by_repeat.get(&p.repeat).map(|o| p.seconds / o))
            .collect();
        let Some(ratio) = Spread::of(&ratios) else {
            unmatched.push(format!("{peer_id} (no repeat in which {ours_id} also ran)"));
            continue;
        };
        let ours_times: Vec<f64> = ours_group.iter().map(|r| r.seconds).collect();
        let peer_times: Vec<f64> = group.iter().map(|r| r.seconds).collect();
        comparisons.push(Comparison {
            explanation: catalogue::explanation(&ours_id).map(str::to_string),
            ours: ours_id,
            peer_id,
            peer: group[0].peer.clone().unwrap_or_else(|| "unnamed peer".into()),
            unit: ours_group[0].unit.clone(),
            ours_seconds: Spread::of(&ours_times).expect("a group has a record"),
            peer_seconds: Spread::of(&peer_times).expect("a group has a record"),
            ratio,
            peak_rss_mb: [peak(ours_group), peak(&group)],
        });
    }
    Summary {
        ours,
        comparisons,
        unmatched,
    }
}

/// A time with a unit that keeps three significant digits (`812 ms`, `3.41 s`, `45.2 µs`).
pub fn human_time(seconds: f64) -> String {
    let (value, unit) = if seconds >= 1.0 {
        (seconds, "s")
    } else if seconds >= 1e-3 {
        (seconds * 1e3, "ms")
    } else {
        (seconds * 1e6, "µs")
    };
    let digits = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    format!("{value:.digits$} {unit}")
}

fn time_cell(s: &Spread) -> String {
    if s.count == 1 {
        human_time(s.median)
    } else {
        format!("{} ({}–{})", human_time(s.median), human_time(s.min), human_time(s.max))
    }
}

fn memory_cell(values: &[Option<f64>]) -> String {
    if values.iter().all(Option::is_none) {
        return String::new();
    }
    let cells: Vec<String> = values
        .iter()
        .map(|v| v.map_or("–".into(), |mb| format!("{mb:.0} MB")))
        .collect();
    cells.join(" / ")
}

/// The markdown report: a heading line with `context` (date, machine, command), the comparison
/// table, the reasons of marked rows, and our measurements that have no peer.
pub fn markdown(summary: &Summary, context: &str) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "{context}\n");
    if !summary.comparisons.is_empty() {
        md.push_str(
            "| workload | unit | ours | peer | peer's time | ratio (peer / ours) | peak memory (ours / peer) |\n\
             |---|---|---|---|---|---|---|\n",
        );
        let mut notes: Vec<(String, String)> = Vec::new();
        for c in &summary.comparisons {
            let mut ratio = if c.ratio.count == 1 {
                format!("{:.2}", c.ratio.median)
            } else {
                format!("{:.2} ({:.2}–{:.2})", c.ratio.median, c.ratio.min, c.ratio.max)
            };
            if c.ratio.median < 1.0 {
                let why = c.explanation.clone().unwrap_or_else(|| "not explained".into());
                let mark = match notes.iter().position(|(w, _)| *w == why) {
                    Some(i) => i + 1,
                    None => {
                        notes.push((why, c.ours.clone()));
                        notes.len()
                    }
                };
                let _ = write!(ratio, " [{mark}]");
            }
            // Two peers of one measurement (POT per pair and batched, say) are told apart by
            // the first part of their ids.
            let shared = summary.comparisons.iter().filter(|o| o.ours == c.ours).count() > 1;
            let peer = match c.peer_id.split('/').next() {
                Some(tag) if shared => format!("{} (`{tag}`)", c.peer),
                _ => c.peer.clone(),
            };
            let _ = writeln!(
                md,
                "| `{}` | {} | {} | {} | {} | {} | {} |",
                c.ours,
                c.unit,
                time_cell(&c.ours_seconds),
                peer,
                time_cell(&c.peer_seconds),
                ratio,
                memory_cell(&c.peak_rss_mb)
            );
        }
        if !notes.is_empty() {
            md.push('\n');
            for (i, (why, _)) in notes.iter().enumerate() {
                let _ = writeln!(md, "[{}] {why}", i + 1);
            }
        }
        md.push('\n');
    }
    let alone: Vec<&Measured> = summary
        .ours
        .iter()
        .filter(|m| !summary.comparisons.iter().any(|c| c.ours == m.id))
        .collect();
    if !alone.is_empty() {
        md.push_str("Without a peer:\n\n| workload | unit | ours | peak memory |\n|---|---|---|---|\n");
        for m in alone {
            let _ = writeln!(
                md,
                "| `{}` | {} | {} | {} |",
                m.id,
                m.unit,
                time_cell(&m.seconds),
                memory_cell(&[m.peak_rss_mb])
            );
        }
        md.push('\n');
    }
    for u in &summary.unmatched {
        let _ = writeln!(md, "Peer measurement without ours: {u}");
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::record::parse;

    fn run(stdout_ours: &str, stdout_peer: &str, repeat: usize) -> Vec<Record> {
        let mut r = parse(stdout_ours, Side::Ours, "t", repeat).unwrap();
        r.extend(parse(stdout_peer, Side::Peer, "t", repeat).unwrap());
        r
    }

    #[test]
    fn ratio_is_peer_over_ours_per_repeat() {
        let mut records = run(
            r#"{"id":"train/a","seconds":1.0,"unit":"step"}"#,
            r#"{"id":"torch/train/a","ours":"train/a","peer":"PyTorch","seconds":2.0,"unit":"step"}"#,
            0,
        );
        records.extend(run(
            r#"{"id":"train/a","seconds":2.0,"unit":"step"}"#,
            r#"{"id":"torch/train/a","ours":"train/a","peer":"PyTorch","seconds":3.0,"unit":"step"}"#,
            1,
        ));
        let s = summarise(&records);
        assert_eq!(s.comparisons.len(), 1);
        let c = &s.comparisons[0];
        // Per repeat: 2/1 and 3/2, not the ratio of the medians (2.5/1.5).
        assert_eq!((c.ratio.min, c.ratio.max), (1.5, 2.0));
        assert_eq!(c.ratio.median, 1.75);
        let md = markdown(&s, "context");
        assert!(
            md.contains("| `train/a` | step | 1.50 s (1.00 s–2.00 s) | PyTorch |"),
            "{md}"
        );
        assert!(!md.contains("[1]"), "a faster row is not marked: {md}");
    }

    #[test]
    fn slower_rows_are_marked_and_unpaired_ones_listed() {
        let records = run(
            "{\"id\":\"x/slow\",\"seconds\":0.004,\"unit\":\"step\",\"peak_rss_mb\":100}\n{\"id\":\"x/alone\",\"seconds\":2e-5,\"unit\":\"pair\"}",
            "{\"id\":\"p/slow\",\"ours\":\"x/slow\",\"peer\":\"P\",\"seconds\":0.002,\"unit\":\"step\",\"peak_rss_mb\":900}\n{\"id\":\"p/gone\",\"ours\":\"x/renamed\",\"peer\":\"P\",\"seconds\":1,\"unit\":\"s\"}",
            0,
        );
        let s = summarise(&records);
        let md = markdown(&s, "context");
        assert!(md.contains("0.50 [1]") && md.contains("[1] not explained"), "{md}");
        assert!(md.contains("100 MB / 900 MB"), "{md}");
        assert!(md.contains("| `x/alone` | pair | 20.0 µs |"), "{md}");
        assert_eq!(s.unmatched, ["p/gone (mirrors x/renamed)"]);
    }

    #[test]
    fn two_peers_of_one_measurement_are_told_apart() {
        let records = run(
            r#"{"id":"s/f64","seconds":0.01,"unit":"1,000 pairs"}"#,
            "{\"id\":\"pot/s/f64\",\"ours\":\"s/f64\",\"peer\":\"POT\",\"seconds\":5,\"unit\":\"u\"}\n{\"id\":\"pot_batch/s/f64\",\"ours\":\"s/f64\",\"peer\":\"POT\",\"seconds\":0.3,\"unit\":\"u\"}",
            0,
        );
        let md = markdown(&summarise(&records), "context");
        assert!(md.contains("| POT (`pot`) | 5.00 s | 500.00 |"), "{md}");
        assert!(md.contains("| POT (`pot_batch`) | 300 ms | 30.00 |"), "{md}");
    }

    #[test]
    fn human_times_keep_three_digits() {
        assert_eq!(human_time(0.8123), "812 ms");
        assert_eq!(human_time(3.412), "3.41 s");
        assert_eq!(human_time(4.52e-5), "45.2 µs");
    }
}
