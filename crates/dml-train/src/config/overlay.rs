//! Layering a configuration: TOML tables merged key by key (the embedded default, a user file),
//! the shortcut flags and `--set key=value` overrides, with the `loss` and `miner` sections
//! replaced wholesale when renamed and a new loss bringing its paper's miner.

use std::path::{Path, PathBuf};

use dml_losses::MinerConfig;

use crate::error::TrainError;

use super::paper_miner::paper_miner;

/// Parses `text` (a TOML document; `origin` names it in errors) into a table.
pub fn parse_table(text: &str, origin: &str) -> Result<toml::Table, TrainError> {
    text.parse::<toml::Table>()
        .map_err(|e| TrainError::Config(format!("{origin}: {e}")))
}

/// Reads and parses a TOML file, naming it in every error.
pub(super) fn read_table(path: &Path) -> Result<toml::Table, TrainError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| TrainError::Config(format!("cannot read config {}: {e}", path.display())))?;
    parse_table(&text, &path.display().to_string())
}

/// `table` with the optional user `file` merged in, then the shortcut flags, then every `--set`
/// assignment, in that order (the layers every resolution applies on top of its base).
///
/// Assignments that choose the loss are applied before the others of their layer: a new loss
/// brings its paper's miner ([`super::paper_miner`]), and a miner given on the same command line
/// must refine or replace that one, whatever the order of the flags.
pub(super) fn overlay(
    mut table: toml::Table,
    file: Option<&Path>,
    shortcuts: &Shortcuts,
    sets: &[String],
) -> Result<toml::Table, TrainError> {
    if let Some(path) = file {
        merge(&mut table, read_table(path)?);
        expand_miner_shorthand(&mut table)?;
    }
    let shortcut_assignments = shortcuts.assignments();
    let (losses, rest): (Vec<&String>, Vec<&String>) =
        shortcut_assignments.iter().chain(sets).partition(|a| chooses_loss(a));
    for assignment in losses.into_iter().chain(rest) {
        apply_override(&mut table, assignment)?;
    }
    Ok(table)
}

/// Whether an assignment chooses the loss (`loss.name=…`).
fn chooses_loss(assignment: &str) -> bool {
    assignment
        .split_once('=')
        .is_some_and(|(key, _)| key.trim() == "loss.name")
}

/// Recursively merges `overlay` into `base`: tables merge key by key, any other value
/// replaces. The `loss` and `miner` sections are replaced wholesale when their `name`
/// differs (a different loss or miner has different parameters, so the old ones must
/// not leak into it); a loss of another name also brings its paper's miner
/// ([`super::paper_miner`]), which the overlay's own `[miner]`, merged after it, refines or
/// replaces.
pub fn merge(base: &mut toml::Table, mut overlay: toml::Table) {
    if let Some(loss) = overlay.remove("loss") {
        let before = loss_name(base);
        merge_entry(base, "loss".into(), loss);
        if loss_name(base) != before {
            reset_miner_for_loss(base);
        }
    }
    for (key, value) in overlay {
        merge_entry(base, key, value);
    }
}

/// Merges one entry of an overlay into `base` (see [`merge`]).
fn merge_entry(base: &mut toml::Table, key: String, value: toml::Value) {
    let section = key == "loss" || key == "miner";
    match (base.get_mut(&key), value) {
        (Some(toml::Value::Table(b)), toml::Value::Table(o)) => {
            let renamed = section && matches!((b.get("name"), o.get("name")), (Some(x), Some(y)) if x != y);
            if renamed {
                *b = o;
            } else {
                for (k, v) in o {
                    merge_entry(b, k, v);
                }
            }
        }
        (_, value) => {
            base.insert(key, value);
        }
    }
}

/// The `loss.name` of a configuration table, if it has one.
fn loss_name(table: &toml::Table) -> Option<String> {
    table
        .get("loss")
        .and_then(|l| l.get("name"))
        .and_then(|n| n.as_str())
        .map(str::to_string)
}

/// Replaces the `[miner]` section by the paper default of the table's loss (removing it when the
/// loss trains without a miner).
fn reset_miner_for_loss(table: &mut toml::Table) {
    let miner = loss_name(table).and_then(|name| paper_miner(&name));
    // Every paper miner serialises: `paper_miner::tests` writes each one as TOML.
    let section = miner.map(|m| miner_table(&m).expect("a paper miner is written as TOML"));
    set_miner(table, section);
}

/// A miner as the `[miner]` table a configuration holds (`None` if it does not serialise as one).
fn miner_table(miner: &MinerConfig) -> Option<toml::Table> {
    match toml::Value::try_from(miner) {
        Ok(toml::Value::Table(t)) => Some(t),
        _ => None,
    }
}

/// Sets `table`'s `[miner]` section, or removes it for `None` (no miner).
fn set_miner(table: &mut toml::Table, section: Option<toml::Table>) {
    match section {
        Some(t) => table.insert("miner".into(), toml::Value::Table(t)),
        None => table.remove("miner"),
    };
}

/// The `[miner]` section that the shorthand `miner = "NAME"` stands for: that miner with its
/// default parameters, or no section for `none`.
fn miner_section(name: &str) -> Result<Option<toml::Table>, TrainError> {
    if name == "none" {
        return Ok(None);
    }
    let miner = MinerConfig::default_for(name).map_err(|e| TrainError::Config(format!("miner = {name:?}: {e}")))?;
    miner_table(&miner)
        .map(Some)
        .ok_or_else(|| TrainError::Config(format!("miner = {name:?}: cannot be written as TOML")))
}

/// Replaces a `miner = "NAME"` string (as a TOML file may write it) by the section it stands for.
pub(super) fn expand_miner_shorthand(table: &mut toml::Table) -> Result<(), TrainError> {
    if let Some(toml::Value::String(name)) = table.get("miner") {
        let section = miner_section(&name.clone())?;
        set_miner(table, section);
    }
    Ok(())
}

/// Applies one `key.path=value` override. The value is read as TOML (`0.1`, `true`,
/// `"text"`, `[1, 2]`); anything that does not parse as TOML is taken as a string, so
/// `--set data.dataset=fashion-mnist` works unquoted. `section=none` removes an
/// optional section (e.g. `miner=none`); `miner=NAME` is shorthand for that miner with its
/// default parameters. Setting `loss.name` to a different name starts that section afresh,
/// dropping the previous loss's parameters, and brings the new loss's paper miner
/// ([`super::paper_miner`]); setting `miner.name` always starts the miner afresh.
pub fn apply_override(table: &mut toml::Table, assignment: &str) -> Result<(), TrainError> {
    let (path, raw) = assignment
        .split_once('=')
        .ok_or_else(|| TrainError::Config(format!("override {assignment:?} is not of the form key.path=value")))?;
    let keys: Vec<&str> = path.trim().split('.').collect();
    if keys.iter().any(|k| k.is_empty()) {
        return Err(TrainError::Config(format!("override {assignment:?} has an empty key")));
    }
    let raw = raw.trim();
    let value = match format!("v = {raw}").parse::<toml::Table>() {
        Ok(mut t) => t.remove("v").unwrap_or(toml::Value::String(raw.to_string())),
        Err(_) => toml::Value::String(raw.to_string()),
    };
    if let (["miner"], Some(name)) = (keys.as_slice(), value.as_str()) {
        set_miner(table, miner_section(name)?);
        return Ok(());
    }
    let loss_before = loss_name(table);
    let (last, parents) = keys.split_last().expect("split yields at least one key");
    let mut cur = &mut *table;
    for (i, key) in parents.iter().enumerate() {
        let entry = cur
            .entry(key.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = entry.as_table_mut().ok_or_else(|| {
            TrainError::Config(format!(
                "override {assignment:?}: {} is not a section",
                keys[..=i].join(".")
            ))
        })?;
    }
    if value.as_str() == Some("none") && parents.is_empty() {
        cur.remove(*last);
        return Ok(());
    }
    // A miner named explicitly starts afresh even under its own name: the section may hold the
    // parameters the loss's paper default brought (semi-hard triplets, say), and
    // `--set miner.name=X` must mean X with its defaults whatever the loss.
    let fresh = match parents {
        ["miner"] => true,
        ["loss"] => cur.get("name").is_some_and(|old| *old != value),
        _ => false,
    };
    if *last == "name" && fresh {
        cur.clear();
    }
    cur.insert(last.to_string(), value);
    if loss_name(table) != loss_before {
        reset_miner_for_loss(table);
    }
    Ok(())
}

/// Command-line overrides of a few common keys, translated to `key=value` assignments.
#[derive(Debug, Clone, Default)]
pub struct Shortcuts {
    /// `device`.
    pub device: Option<String>,
    /// `data.dataset`.
    pub dataset: Option<String>,
    /// `model.backbone`.
    pub backbone: Option<String>,
    /// `loss.name` (resets the loss's parameters to the new loss's defaults and the miner to
    /// the loss's paper default, see [`super::paper_miner`]).
    pub loss: Option<String>,
    /// `miner`: a miner's name (with its default parameters) or `none`.
    pub miner: Option<String>,
    /// `train.epochs`.
    pub epochs: Option<usize>,
    /// `train.batch_size`.
    pub batch_size: Option<usize>,
    /// `seed`.
    pub seed: Option<u64>,
    /// `name`.
    pub name: Option<String>,
    /// `run_dir`.
    pub run_dir: Option<PathBuf>,
}

impl Shortcuts {
    fn assignments(&self) -> Vec<String> {
        let mut out = Vec::new();
        let quote = |s: &str| toml::Value::String(s.to_string()).to_string();
        if let Some(v) = &self.device {
            out.push(format!("device={}", quote(v)));
        }
        if let Some(v) = &self.dataset {
            out.push(format!("data.dataset={}", quote(v)));
        }
        if let Some(v) = &self.backbone {
            out.push(format!("model.backbone={}", quote(v)));
        }
        if let Some(v) = &self.loss {
            out.push(format!("loss.name={}", quote(v)));
        }
        if let Some(v) = &self.miner {
            out.push(format!("miner={}", quote(v)));
        }
        if let Some(v) = self.epochs {
            out.push(format!("train.epochs={v}"));
        }
        if let Some(v) = self.batch_size {
            out.push(format!("train.batch_size={v}"));
        }
        if let Some(v) = self.seed {
            out.push(format!("seed={v}"));
        }
        if let Some(v) = &self.name {
            out.push(format!("name={}", quote(v)));
        }
        if let Some(v) = &self.run_dir {
            out.push(format!("run_dir={}", quote(&v.to_string_lossy())));
        }
        out
    }
}
