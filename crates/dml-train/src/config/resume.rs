//! What a resumed run may change: the saved configuration is the experiment's record.

use std::collections::{BTreeMap, BTreeSet};

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

/// The keys on which the configuration table `given` differs from `saved` (both as
/// `TrainConfig::to_table` writes them), except `allowed`, each as `key: saved → given` with the
/// keys padded to one width (a key only one side has shows `(unset)` on the other).
pub fn changed_keys(saved: &toml::Table, given: &toml::Table, allowed: &[&str]) -> Vec<String> {
    let leaves = |t: &toml::Table| {
        let mut out = BTreeMap::new();
        flatten(t, "", &mut out);
        out
    };
    let (a, b) = (leaves(saved), leaves(given));
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let unset = "(unset)".to_string();
    let changed: Vec<(&String, &String, &String)> = keys
        .into_iter()
        .filter(|k| !allowed.contains(&k.as_str()))
        .map(|k| (k, a.get(k).unwrap_or(&unset), b.get(k).unwrap_or(&unset)))
        .filter(|(_, x, y)| x != y)
        .collect();
    let width = changed.iter().map(|(k, _, _)| k.chars().count()).max().unwrap_or(0);
    changed
        .into_iter()
        .map(|(k, x, y)| format!("  {k:<width$}: {x} → {y}"))
        .collect()
}
