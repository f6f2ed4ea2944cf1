//! What a resumed run may change: the saved configuration is the experiment's record.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::TrainError;

use super::TrainConfig;
use super::overlay::parse_table;

/// The keys a resumed run may change: more epochs, the decoding threads (which do not change
/// what is computed) and the run's location.
pub const RESUME_MAY_CHANGE: &[&str] = &["train.epochs", "data.threads", "name", "run_dir"];

/// Every leaf of a TOML table as `dotted.key → value`.
fn flatten(table: &toml::Table, prefix: &str, out: &mut BTreeMap<String, String>) {
    for (key, value) in table {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            toml::Value::Table(t) => flatten(t, &path, out),
            v => {
                out.insert(path, v.to_string());
            }
        }
    }
}

/// The keys on which `given` differs from `saved`, except `allowed`, each as
/// `key: saved → given` with the keys padded to one width (a key only one side has shows
/// `(unset)` on the other).
pub fn changed_keys(saved: &TrainConfig, given: &TrainConfig, allowed: &[&str]) -> Result<Vec<String>, TrainError> {
    let leaves = |c: &TrainConfig| -> Result<BTreeMap<String, String>, TrainError> {
        let mut out = BTreeMap::new();
        flatten(&parse_table(&c.to_toml()?, "configuration")?, "", &mut out);
        Ok(out)
    };
    let (a, b) = (leaves(saved)?, leaves(given)?);
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let unset = "(unset)".to_string();
    let changed: Vec<(&String, &String, &String)> = keys
        .into_iter()
        .filter(|k| !allowed.contains(&k.as_str()))
        .map(|k| (k, a.get(k).unwrap_or(&unset), b.get(k).unwrap_or(&unset)))
        .filter(|(_, x, y)| x != y)
        .collect();
    let width = changed.iter().map(|(k, _, _)| k.chars().count()).max().unwrap_or(0);
    Ok(changed
        .into_iter()
        .map(|(k, x, y)| format!("  {k:<width$}: {x} → {y}"))
        .collect())
}
