//! Errors of reading a merged table as a configuration, led by the key at fault.

use dml_losses::MinerConfig;

/// An error of turning the merged table into a configuration, led by the key it is about: toml
/// names the key of a plain field, but not one inside the internally tagged `loss` and `miner`
/// sections, whose culprit is found by leaving out one key at a time.
pub(super) fn describe_error(table: &toml::Table, e: &toml::de::Error) -> String {
    let message = e.message().trim();
    let shown = e.to_string();
    let key = shown
        .lines()
        .find_map(|l| l.strip_prefix("in `").and_then(|k| k.strip_suffix('`')));
    if let Some(key) = key.filter(|k| *k != "loss" && *k != "miner") {
        return format!("{key}: {message}");
    }
    section_culprit::<dml_losses::LossConfig>(table, "loss", message)
        .or_else(|| section_culprit::<MinerConfig>(table, "miner", message))
        .unwrap_or_else(|| message.to_string())
}

/// The key of the `name` section of `table` that keeps it from reading as a `T`, found by leaving
/// out one key at a time, as `name.key = value: message` (`name: message` when no single key is to
/// blame); `None` when the section reads.
fn section_culprit<T: serde::de::DeserializeOwned>(table: &toml::Table, name: &str, message: &str) -> Option<String> {
    let fails = |section: &toml::Table| toml::Value::Table(section.clone()).try_into::<T>().is_err();
    let Some(toml::Value::Table(section)) = table.get(name) else {
        return None;
    };
    if !fails(section) {
        return None;
    }
    for (key, value) in section.iter().filter(|(k, _)| *k != "name") {
        let mut without = section.clone();
        without.remove(key);
        if !fails(&without) {
            return Some(format!("{name}.{key} = {value}: {message}"));
        }
    }
    Some(format!("{name}: {message}"))
}
