//! One measurement as a bench or a peer script printed it, and the statistics over repeats.
//!
//! The line format is `dml_testkit::bench`'s: a JSON object with `id`, `seconds` (of one `unit`
//! of work) and `unit`; a peer's line also names the measurement it mirrors in `ours` and the
//! library in `peer`. Other keys are details, kept as printed.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Which program printed a measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// A bench of this workspace.
    Ours,
    /// A Python peer script.
    Peer,
}

/// One measurement line of one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// Who printed it.
    pub side: Side,
    /// The catalogue entry that ran (`throughput`, `retrieval`, …).
    pub entry: String,
    /// The repeat it came from (0-based).
    pub repeat: usize,
    /// The measurement's id.
    pub id: String,
    /// Seconds per unit of work.
    pub seconds: f64,
    /// What one unit is.
    pub unit: String,
    /// For a peer: the id of our measurement it mirrors.
    pub ours: Option<String>,
    /// For a peer: the library (and version) that ran.
    pub peer: Option<String>,
    /// Every other key of the line.
    pub details: Map<String, Value>,
}

/// The measurement records in a program's standard output. Lines that are not JSON objects with
/// an `id` are progress or summaries and are skipped; a line with an `id` but without a finite,
/// non-negative `seconds` (or, from a peer, without `ours`) is an error naming the line.
pub fn parse(stdout: &str, side: Side, entry: &str, repeat: usize) -> anyhow::Result<Vec<Record>> {
    let mut records = Vec::new();
    for (number, line) in stdout.lines().enumerate() {
        let Ok(Value::Object(mut object)) = serde_json::from_str::<Value>(line.trim()) else {
            continue;
        };
        let Some(id) = object.remove("id") else {
            continue;
        };
        let context = || format!("{entry}: output line {} ({line})", number + 1);
        let id = id
            .as_str()
            .ok_or_else(|| anyhow::anyhow!("{}: \"id\" is not a string", context()))?
            .to_string();
        let seconds = object
            .remove("seconds")
            .and_then(|s| s.as_f64())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .ok_or_else(|| anyhow::anyhow!("{}: \"seconds\" is missing or not a finite time", context()))?;
        let unit = match object.remove("unit") {
            Some(Value::String(u)) => u,
            _ => anyhow::bail!("{}: \"unit\" is missing", context()),
        };
        let text = |key: &str, object: &mut Map<String, Value>| match object.remove(key) {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
        let ours = text("ours", &mut object);
        let peer = text("peer", &mut object);
        if side == Side::Peer && ours.is_none() {
            anyhow::bail!("{}: a peer's line must name our measurement in \"ours\"", context());
        }
        records.push(Record {
            side,
            entry: entry.to_string(),
            repeat,
            id,
            seconds,
            unit,
            ours,
            peer,
            details: object,
        });
    }
    Ok(records)
}

/// The median, minimum and maximum of a set of values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    /// The median (the mean of the two middle values for an even count).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
    /// How many values.
    pub count: usize,
}

impl Spread {
    /// The spread of `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        let mut sorted = values.to_vec();
        let median = dml_testkit::bench::median(&mut sorted);
        let n = sorted.len();
        Some(Self {
            median,
            min: sorted[0],
            max: sorted[n - 1],
            count: n,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_measurements_and_skips_other_lines() {
        let out = "warming up\n{\"id\":\"losses/x\",\"seconds\":0.5,\"unit\":\"step\",\"n\":3}\n{\"ratio\":2}\n";
        let r = parse(out, Side::Ours, "losses", 1).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].id.as_str(), r[0].seconds, r[0].repeat), ("losses/x", 0.5, 1));
        assert_eq!(r[0].details["n"], 3);
        assert!(!r[0].details.contains_key("seconds"));
    }

    #[test]
    fn a_bad_time_or_a_peer_without_ours_names_the_line() {
        let err = parse("{\"id\":\"a\",\"seconds\":null,\"unit\":\"s\"}", Side::Ours, "e", 0).unwrap_err();
        assert!(
            err.to_string().contains("line 1") && err.to_string().contains("seconds"),
            "{err}"
        );
        let err = parse("{\"id\":\"a\",\"seconds\":1,\"unit\":\"s\"}", Side::Peer, "e", 0).unwrap_err();
        assert!(err.to_string().contains("\"ours\""), "{err}");
    }

    #[test]
    fn spread_of_odd_and_even_counts() {
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.count), (2.0, 1.0, 3.0, 3));
        assert_eq!(Spread::of(&[4.0, 1.0]).unwrap().median, 2.5);
        assert!(Spread::of(&[]).is_none());
    }
}
