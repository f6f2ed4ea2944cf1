//! The run configuration: the embedded default, a user TOML file and command-line
//! overrides, merged as TOML tables and then checked into typed structs.

use std::path::{Path, PathBuf};

use dml_losses::{LossConfig, MarginLossConfig, MinerConfig};
use dml_models::Pooling;
use serde::{Deserialize, Serialize};

use crate::error::TrainError;

/// The embedded default configuration (`assets/configs/default.toml`).
pub const DEFAULT_TOML: &str = include_str!("../../../assets/configs/default.toml");

dml_config::config! {
    /// Everything a training run depends on; written resolved to `<run>/config.toml`.
    ///
    /// A run starts from the embedded [`DEFAULT_TOML`], which sets every key; the defaults
    /// declared here say what a key that a TOML document leaves out means (when reading the
    /// `config.toml` of a run written before the key existed, for example). They equal the
    /// embedded default's values except `miner`: an absent `[miner]` section means no miner,
    /// which is also how `--set miner=none` removes it.
    #[derive(Debug, Clone)]
    pub struct TrainConfig {
        /// Run name: the run directory is `run_dir/name`.
        pub name: String = "default".into(),
        /// Parent directory of run directories.
        pub run_dir: PathBuf = "runs".into(),
        /// Seed of every random choice (initialisation, sampling, augmentation, mining).
        pub seed: u64 = 0,
        /// `flex`, `ndarray`, `wgpu` or `cuda` (see [`crate::device::parse_device`]).
        pub device: String = "flex".into(),
        /// Dataset and input pipeline.
        pub data: DataConfig = DataConfig::default(),
        /// Backbone and embedding head.
        pub model: ModelConfig = ModelConfig::default(),
        /// The loss (by name, with its parameters; see `dml_losses::LossConfig`).
        pub loss: LossConfig = LossConfig::Margin(MarginLossConfig {
            learn_beta: true,
            ..MarginLossConfig::default()
        }),
        /// The optional miner (by name, with its parameters).
        pub miner: Option<MinerConfig> = None,
        /// Optimiser and per-group learning rates.
        pub optimizer: OptimizerConfig = OptimizerConfig::default(),
        /// Step learning-rate schedule.
        pub schedule: ScheduleConfig = ScheduleConfig::default(),
        /// Epochs and batches.
        pub train: LoopConfig = LoopConfig::default(),
        /// Evaluation and best-model selection.
        pub eval: EvalConfig = EvalConfig::default(),
        /// DIML structural matching inside the loss.
        pub diml: crate::diml::DimlConfig = crate::diml::DimlConfig::default(),
        /// Similarity mining (Zheng et al., Eq. 3): `L = L_ml + γ L_sm`.
        pub similarity_mining: dml_explain::SimilarityMiningConfig = dml_explain::SimilarityMiningConfig::default(),
        /// AVSL (Zhang et al.): the multi-level similarity graph in training and evaluation.
        pub avsl: crate::avsl::AvslConfig = crate::avsl::AvslConfig::default(),
    }
}

dml_config::config! {
    /// Dataset and input pipeline.
    #[derive(Debug, Clone)]
    pub struct DataConfig {
        /// `synth`, `fashion-mnist` or the path of a `manifest.csv`.
        pub dataset: String = "synth".into(),
        /// Directory of the named datasets.
        pub root: PathBuf = "data".into(),
        /// Network input side in pixels.
        pub image_size: u32 = 48,
        /// Random-resized-crop and flip for training.
        pub augment: bool = true,
        /// Hold out the last N training classes as `val` (0: keep the manifest's splits).
        pub val_classes: usize = 0,
        /// Decoding threads (0: one per core).
        pub threads: usize = 0,
        /// Images generated for the synthetic set.
        pub synth_images: usize = 4000,
        /// Side of the generated synthetic images.
        pub synth_size: u32 = 64,
        /// Per-channel (RGB) mean subtracted from pixels scaled to [0, 1]: ImageNet's suit
        /// torchvision's weights (and runs written before the key existed); Cadene's
        /// BN-Inception weights want `[128, 117, 104]/255`.
        pub mean: [f32; 3] = dml_data::transform::IMAGENET_MEAN,
        /// Per-channel (RGB) standard deviation divided by after the mean: ImageNet's suit
        /// torchvision's weights; Cadene's BN-Inception weights, trained on pixels in
        /// [0, 255], want `1/255`.
        pub std: [f32; 3] = dml_data::transform::IMAGENET_STD,
    }
}

dml_config::config! {
    /// Backbone and embedding head.
    #[derive(Debug, Clone)]
    pub struct ModelConfig {
        /// `small_cnn`, `resnet18`, `resnet50` or `bn_inception`.
        pub backbone: String = "small_cnn".into(),
        /// Pretrained weights (`.pth` / `.safetensors`): torchvision's for a ResNet, Cadene's
        /// `bninception` for BN-Inception; empty for none.
        pub pretrained: String = String::new(),
        /// Embedding dimension D.
        pub embedding_dim: usize = 64,
        /// Pooling of the last feature map.
        pub pooling: Pooling = Pooling::Avg,
        /// L2-normalise the embeddings (and evaluate with cosine similarity).
        pub normalize: bool = true,
        /// Freeze every batch-norm layer of the backbone.
        pub freeze_batchnorm: bool = false,
    }
}

/// The optimiser family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    /// Adam (Kingma & Ba), L2 weight decay added to the gradient.
    Adam,
    /// AdamW (Loshchilov & Hutter), decoupled weight decay.
    Adamw,
    /// SGD with momentum.
    Sgd,
}

dml_config::config! {
    /// Optimiser and per-group learning rates.
    #[derive(Debug, Clone)]
    pub struct OptimizerConfig {
        /// The optimiser.
        pub name: OptimizerKind = OptimizerKind::Adam,
        /// Learning rate of the backbone.
        pub lr_backbone: f64 = 1e-3,
        /// Learning rate of the embedding head.
        pub lr_head: f64 = 1e-3,
        /// Learning rate of the loss's parameters (proxies, class weights, β).
        pub lr_loss: f64 = 1e-2,
        /// Weight decay (L2 for Adam and SGD, decoupled for AdamW).
        pub weight_decay: f64 = 0.0,
        /// SGD momentum.
        pub momentum: f64 = 0.9,
    }
}

dml_config::config! {
    /// Step learning-rate schedule: `lr · gamma^(epoch / step_epochs)`.
    #[derive(Debug, Clone)]
    pub struct ScheduleConfig {
        /// Epochs between decays (0: constant).
        pub step_epochs: usize = 0,
        /// Decay factor.
        pub gamma: f64 = 0.5,
    }
}

impl ScheduleConfig {
    /// The learning-rate factor during (0-based) `epoch`.
    pub fn factor(&self, epoch: usize) -> f64 {
        match epoch.checked_div(self.step_epochs) {
            None => 1.0,
            Some(steps) => self.gamma.powi(steps as i32),
        }
    }
}

dml_config::config! {
    /// Epochs and batches.
    #[derive(Debug, Clone)]
    pub struct LoopConfig {
        /// Training epochs.
        pub epochs: usize = 6,
        /// Images per batch.
        pub batch_size: usize = 40,
        /// Images per class in a batch.
        pub m: usize = 8,
        /// Images per epoch (0: the training split's size).
        pub samples_per_epoch: usize = 0,
    }
}

/// The metric used to pick the best checkpoint on `val`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SelectBy {
    /// Precision@1.
    PrecisionAt1,
    /// R-Precision.
    RPrecision,
    /// MAP@R.
    MapAtR,
}

dml_config::config! {
    /// Evaluation and best-model selection.
    #[derive(Debug, Clone)]
    pub struct EvalConfig {
        /// Evaluate every N epochs (0: only before and after training).
        pub every: usize = 1,
        /// The split whose metrics are reported (`test`, `val`, `train`, …).
        pub split: String = "test".into(),
        /// Best-checkpoint criterion on the `val` split.
        pub select_by: SelectBy = SelectBy::MapAtR,
        /// Images per forward pass when embedding.
        pub batch_size: usize = 128,
    }
}

/// Parses `text` (a TOML document; `origin` names it in errors) into a table.
pub fn parse_table(text: &str, origin: &str) -> Result<toml::Table, TrainError> {
    text.parse::<toml::Table>()
        .map_err(|e| TrainError::Config(format!("{origin}: {e}")))
}

/// Reads and parses a TOML file, naming it in every error.
fn read_table(path: &Path) -> Result<toml::Table, TrainError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| TrainError::Config(format!("cannot read config {}: {e}", path.display())))?;
    parse_table(&text, &path.display().to_string())
}

/// `table` with the optional user `file` merged in, then the shortcut flags, then every `--set`
/// assignment, in that order (the layers every resolution applies on top of its base).
///
/// Assignments that choose the loss are applied before the others of their layer: a new loss
/// brings its paper's miner ([`crate::paper_miner`]), and a miner given on the same command line
/// must refine or replace that one, whatever the order of the flags.
fn overlay(
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

/// An error of turning the merged table into a configuration, led by the key it is about: toml
/// names the key of a plain field, but not one inside the internally tagged `loss` and `miner`
/// sections, whose culprit is found by leaving out one key at a time.
fn describe_error(table: &toml::Table, e: &toml::de::Error) -> String {
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

/// The keys a resumed run may change: more epochs, the decoding threads (which do not change
/// what is computed) and the run's location.
pub const RESUME_MAY_CHANGE: &[&str] = &["train.epochs", "data.threads", "name", "run_dir"];

/// Every leaf of a TOML table as `dotted.key → value`.
fn flatten(table: &toml::Table, prefix: &str, out: &mut std::collections::BTreeMap<String, String>) {
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
    let leaves = |c: &TrainConfig| -> Result<std::collections::BTreeMap<String, String>, TrainError> {
        let mut out = std::collections::BTreeMap::new();
        flatten(&parse_table(&c.to_toml()?, "configuration")?, "", &mut out);
        Ok(out)
    };
    let (a, b) = (leaves(saved)?, leaves(given)?);
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
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

/// Recursively merges `overlay` into `base`: tables merge key by key, any other value
/// replaces. The `loss` and `miner` sections are replaced wholesale when their `name`
/// differs (a different loss or miner has different parameters, so the old ones must
/// not leak into it); a loss of another name also brings its paper's miner
/// ([`crate::paper_miner`]), which the overlay's own `[miner]`, merged after it, refines or
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
    let miner = loss_name(table).and_then(|name| crate::paper_miner::paper_miner(&name));
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
fn expand_miner_shorthand(table: &mut toml::Table) -> Result<(), TrainError> {
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
/// ([`crate::paper_miner`]); setting `miner.name` always starts the miner afresh.
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
    /// the loss's paper default, see [`crate::paper_miner`]).
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

impl TrainConfig {
    /// Resolves the configuration: the embedded default, then the optional user file,
    /// then the shortcut flags, then every `--set` assignment, in that order.
    pub fn resolve(file: Option<&Path>, shortcuts: &Shortcuts, sets: &[String]) -> Result<Self, TrainError> {
        let table = parse_table(DEFAULT_TOML, "embedded default config")?;
        Self::from_table(overlay(table, file, shortcuts, sets)?, file)
    }

    /// The configuration a resumed run continues with: the run's saved `config.toml` (the source
    /// of truth) with the command line's `file` and overrides applied on top. A key they change
    /// other than those in [`RESUME_MAY_CHANGE`] (more epochs, decoding threads, where the run
    /// lives) is an error listing every changed key as `key: saved → given`, aligned.
    pub fn resolve_resume(
        saved: &Path,
        file: Option<&Path>,
        shortcuts: &Shortcuts,
        sets: &[String],
    ) -> Result<Self, TrainError> {
        let base = read_table(saved)?;
        let given = Self::from_table(overlay(base.clone(), file, shortcuts, sets)?, file)?;
        let saved_config = Self::from_table(base, Some(saved))?;
        let changed = changed_keys(&saved_config, &given, RESUME_MAY_CHANGE)?;
        if !changed.is_empty() {
            return Err(TrainError::Config(format!(
                "--resume continues the run as {} configured it; these settings differ (only {} may change on resume):\n{}",
                saved.display(),
                RESUME_MAY_CHANGE.join(", "),
                changed.join("\n")
            )));
        }
        Ok(given)
    }

    /// Checks a merged table into a configuration; errors name the offending key.
    pub fn from_table(mut table: toml::Table, origin: Option<&Path>) -> Result<Self, TrainError> {
        let origin = origin.map_or_else(
            || "configuration".to_string(),
            |p| format!("configuration (from {})", p.display()),
        );
        expand_miner_shorthand(&mut table)?;
        let config: Self = toml::Value::Table(table.clone())
            .try_into()
            .map_err(|e: toml::de::Error| TrainError::Config(format!("{origin}: {}", describe_error(&table, &e))))?;
        config.validate()?;
        Ok(config)
    }

    /// The loss and the miner a run trains with, as printed when it starts:
    /// `loss margin (margin = 0.2, …), miner distance_weighted (…), the loss's default`.
    pub fn loss_and_miner(&self) -> String {
        let describe = |value: Option<toml::Value>| match value {
            Some(toml::Value::Table(mut t)) => {
                let name = t
                    .remove("name")
                    .and_then(|n| n.as_str().map(str::to_string))
                    .unwrap_or_default();
                let params: Vec<String> = t.iter().map(|(k, v)| format!("{k} = {v}")).collect();
                if params.is_empty() {
                    name
                } else {
                    format!("{name} ({})", params.join(", "))
                }
            }
            _ => "?".into(),
        };
        let loss = describe(toml::Value::try_from(&self.loss).ok());
        let miner = self
            .miner
            .as_ref()
            .map_or_else(|| "none".to_string(), |m| describe(toml::Value::try_from(m).ok()));
        let default = crate::paper_miner::paper_miner(self.loss.name());
        let note = if default == self.miner {
            "the loss's default"
        } else {
            "not the loss's default"
        };
        format!("loss {loss}, miner {miner} ({note})")
    }

    /// Reads a resolved `config.toml` (of a run directory).
    pub fn read(path: &Path) -> Result<Self, TrainError> {
        Self::from_table(read_table(path)?, Some(path))
    }

    /// The resolved configuration as TOML text.
    pub fn to_toml(&self) -> Result<String, TrainError> {
        toml::to_string_pretty(self).map_err(|e| TrainError::Config(format!("cannot serialise the configuration: {e}")))
    }

    /// The run directory `run_dir/name`.
    pub fn run_path(&self) -> PathBuf {
        self.run_dir.join(&self.name)
    }

    /// Checks value ranges that serde cannot express.
    pub fn validate(&self) -> Result<(), TrainError> {
        let fail = |key: &str, why: String| Err(TrainError::Config(format!("{key}: {why}")));
        crate::device::parse_device(&self.device)?;
        self.diml.validate(&self.loss)?;
        crate::mining::validate(&self.similarity_mining, &self.loss, &self.diml)?;
        self.avsl.validate(
            &self.loss,
            &[
                ("diml", self.diml.enabled),
                ("similarity_mining", self.similarity_mining.enabled),
            ],
        )?;
        dml_models::BackboneConfig::from_name(&self.model.backbone)
            .map_err(|e| TrainError::Config(format!("model.backbone: {e}")))?;
        if self.name.is_empty() || self.name.contains(['/', '\\']) || self.name == "." || self.name == ".." {
            return fail("name", format!("{:?} is not a plain directory name", self.name));
        }
        if self.model.embedding_dim == 0 {
            return fail("model.embedding_dim", "must be positive".into());
        }
        if self.data.image_size < 8 {
            return fail(
                "data.image_size",
                format!("{} is too small (at least 8)", self.data.image_size),
            );
        }
        if !self.data.std.iter().all(|s| s.is_finite() && *s > 0.0) {
            return fail("data.std", format!("{:?} must be positive and finite", self.data.std));
        }
        if !self.data.mean.iter().all(|m| m.is_finite()) {
            return fail("data.mean", format!("{:?} must be finite", self.data.mean));
        }
        let t = &self.train;
        if t.m == 0 || t.batch_size == 0 || !t.batch_size.is_multiple_of(t.m) || t.batch_size / t.m < 2 {
            return fail(
                "train.batch_size",
                format!(
                    "{} must be a multiple of train.m = {} with at least 2 classes per batch",
                    t.batch_size, t.m
                ),
            );
        }
        for (key, lr) in [
            ("optimizer.lr_backbone", self.optimizer.lr_backbone),
            ("optimizer.lr_head", self.optimizer.lr_head),
            ("optimizer.lr_loss", self.optimizer.lr_loss),
        ] {
            if !(lr.is_finite() && lr >= 0.0) {
                return fail(key, format!("{lr} is not a finite non-negative learning rate"));
            }
        }
        if !(self.schedule.gamma.is_finite() && self.schedule.gamma > 0.0) {
            return fail("schedule.gamma", format!("{} must be positive", self.schedule.gamma));
        }
        if self.eval.batch_size == 0 {
            return fail("eval.batch_size", "must be positive".into());
        }
        self.eval
            .split
            .parse::<dml_data::Split>()
            .map_err(|e| TrainError::Config(format!("eval.split: {e}")))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_resolves_and_round_trips() {
        let c = TrainConfig::resolve(None, &Shortcuts::default(), &[]).unwrap();
        assert_eq!(c.device, "flex");
        let again = TrainConfig::from_table(parse_table(&c.to_toml().unwrap(), "x").unwrap(), None).unwrap();
        assert_eq!(again.to_toml().unwrap(), c.to_toml().unwrap());
    }

    #[test]
    fn overrides_parse_values_and_reset_renamed_sections() {
        let sets = vec![
            "train.epochs=7".to_string(),
            "data.dataset=fashion-mnist".to_string(),
            "optimizer.lr_head=0.5".to_string(),
            "miner=none".to_string(),
        ];
        let c = TrainConfig::resolve(None, &Shortcuts::default(), &sets).unwrap();
        assert_eq!(c.train.epochs, 7);
        assert_eq!(c.data.dataset, "fashion-mnist");
        assert_eq!(c.optimizer.lr_head, 0.5);
        assert!(c.miner.is_none());
        // The run name is a plain top-level key, not a section's name.
        let s = Shortcuts {
            name: Some("other".into()),
            ..Shortcuts::default()
        };
        assert_eq!(TrainConfig::resolve(None, &s, &[]).unwrap().name, "other");
        // Changing the optimiser keeps its learning rates.
        let c = TrainConfig::resolve(None, &Shortcuts::default(), &["optimizer.name=sgd".to_string()]).unwrap();
        assert_eq!(c.optimizer.name, OptimizerKind::Sgd);
        // Switching the loss drops the margin loss's `beta`, which ProxyAnchor would reject.
        let s = Shortcuts {
            loss: Some("proxy_anchor".into()),
            ..Shortcuts::default()
        };
        let c = TrainConfig::resolve(None, &s, &[]).unwrap();
        assert!(format!("{:?}", c.loss).to_lowercase().contains("proxy"));
    }

    #[test]
    fn bad_values_name_their_key() {
        let err = |sets: &[&str]| {
            let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            TrainConfig::resolve(None, &Shortcuts::default(), &sets)
                .unwrap_err()
                .to_string()
        };
        assert!(err(&["loss.name=no_such_loss"]).contains("no_such_loss"));
        assert!(err(&["device=tpu"]).contains("tpu"));
        assert!(err(&["train.batch_size=30"]).contains("train.batch_size"));
        assert!(err(&["model.backbone=vgg"]).contains("vgg"));
        assert!(err(&["train.epochz=3"]).contains("epochz"));
        assert!(err(&["optimizer.name=rmsprop"]).contains("rmsprop"));
        assert!(err(&["train.epochs"]).contains("key.path=value"));
        assert!(err(&["eval.split=banana"]).contains("eval.split"));
        assert!(err(&["data.std=[0.2, 0.0, 0.2]"]).contains("data.std"));
    }

    fn with(shortcuts: Shortcuts, sets: &[&str]) -> Result<TrainConfig, TrainError> {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        TrainConfig::resolve(None, &shortcuts, &sets)
    }

    fn loss(name: &str) -> Shortcuts {
        Shortcuts {
            loss: Some(name.into()),
            ..Shortcuts::default()
        }
    }

    fn miner_name(c: &TrainConfig) -> Option<String> {
        c.miner
            .as_ref()
            .map(|m| toml::Value::try_from(m).unwrap()["name"].as_str().unwrap().to_string())
    }

    #[test]
    fn a_loss_brings_its_paper_miner_unless_one_is_given() {
        let c = with(loss("multi_similarity"), &[]).unwrap();
        assert_eq!(miner_name(&c).as_deref(), Some("multi_similarity"));
        assert_eq!(with(loss("proxy_anchor"), &[]).unwrap().miner, None);
        let c = with(loss("triplet_margin"), &[]).unwrap();
        assert_eq!(c.miner, crate::paper_miner::paper_miner("triplet_margin"));
        assert!(
            c.loss_and_miner().contains("type_of_triplets = \"semihard\""),
            "{}",
            c.loss_and_miner()
        );
        // The default loss keeps the default miner, however it is named.
        let c = with(loss("margin"), &[]).unwrap();
        assert_eq!(miner_name(&c).as_deref(), Some("distance_weighted"));
        assert!(
            c.loss_and_miner().ends_with("(the loss's default)"),
            "{}",
            c.loss_and_miner()
        );
        // A miner given on the same command line wins, whatever the order of the flags.
        let c = with(
            Shortcuts {
                miner: Some("none".into()),
                ..loss("multi_similarity")
            },
            &[],
        )
        .unwrap();
        assert_eq!(c.miner, None);
        assert!(c.loss_and_miner().contains("miner none (not the loss's default)"));
        let c = with(
            Shortcuts::default(),
            &["miner.epsilon=0.3", "loss.name=multi_similarity"],
        )
        .unwrap();
        assert_eq!(
            c.miner,
            Some(MinerConfig::MultiSimilarity(dml_losses::MultiSimilarityMinerConfig {
                epsilon: 0.3,
                ..Default::default()
            }))
        );
        let c = with(loss("contrastive"), &["miner=batch_hard"]).unwrap();
        assert_eq!(miner_name(&c).as_deref(), Some("batch_hard"));
        // Naming the paper's miner explicitly means that miner with its own defaults.
        let c = with(loss("triplet_margin"), &["miner.name=triplet_margin"]).unwrap();
        assert_eq!(c.miner, MinerConfig::default_for("triplet_margin").ok());
    }

    #[test]
    fn miner_name_is_shorthand_for_that_miner_with_its_defaults() {
        let c = with(Shortcuts::default(), &["miner=multi_similarity"]).unwrap();
        assert_eq!(c.miner, MinerConfig::default_for("multi_similarity").ok());
        let c = with(
            Shortcuts {
                miner: Some("pair_margin".into()),
                ..Shortcuts::default()
            },
            &[],
        )
        .unwrap();
        assert_eq!(c.miner, MinerConfig::default_for("pair_margin").ok());
        let e = with(Shortcuts::default(), &["miner=lucky"]).unwrap_err().to_string();
        assert!(
            e.contains("miner") && e.contains("lucky") && e.contains("batch_hard"),
            "{e}"
        );
        // In a file too, and a file's other loss brings its own miner.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("run.toml");
        std::fs::write(&file, "miner = \"batch_hard\"\n").unwrap();
        let c = TrainConfig::resolve(Some(&file), &Shortcuts::default(), &[]).unwrap();
        assert_eq!(c.miner, MinerConfig::default_for("batch_hard").ok());
        std::fs::write(&file, "[loss]\nname = \"proxy_anchor\"\n").unwrap();
        let c = TrainConfig::resolve(Some(&file), &Shortcuts::default(), &[]).unwrap();
        assert_eq!(c.miner, None);
    }

    #[test]
    fn a_bad_value_inside_the_loss_or_miner_names_its_key() {
        let e = with(Shortcuts::default(), &["loss.margin=abc"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("loss.margin = \"abc\""), "{e}");
        let e = with(Shortcuts::default(), &["miner.cutoff=[1]"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("miner.cutoff = [1]"), "{e}");
        let e = with(Shortcuts::default(), &["train.epochs=abc"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("train.epochs"), "{e}");
    }

    #[test]
    fn normalisation_reaches_both_transforms_and_defaults_to_imagenet() {
        let sets = [
            "data.mean=[0.5, 0.45, 0.4]".to_string(),
            "data.std=[0.004, 0.004, 0.004]".to_string(),
        ];
        let config = TrainConfig::resolve(None, &Shortcuts::default(), &sets).unwrap();
        for t in [
            crate::data::train_transform(&config.data),
            crate::data::eval_transform(&config.data),
        ] {
            assert_eq!((t.mean, t.std), ([0.5, 0.45, 0.4], [0.004; 3]));
        }
        let default = TrainConfig::resolve(None, &Shortcuts::default(), &[]).unwrap();
        assert_eq!(default.data.mean, dml_data::transform::IMAGENET_MEAN);
        assert_eq!(default.data.std, dml_data::transform::IMAGENET_STD);
    }

    #[test]
    fn declared_defaults_agree_with_the_embedded_default() {
        let embedded = TrainConfig::resolve(None, &Shortcuts::default(), &[]).unwrap();
        assert!(embedded.miner.is_some(), "the default run mines its tuples");
        // An absent `[miner]` section means no miner, so that is the declared default.
        assert!(TrainConfig::default().miner.is_none());
        let declared = TrainConfig {
            miner: embedded.miner.clone(),
            ..TrainConfig::default()
        };
        assert_eq!(declared.to_toml().unwrap(), embedded.to_toml().unwrap());
    }

    #[test]
    fn an_old_run_config_without_newer_keys_still_reads() {
        let mut table = parse_table(&TrainConfig::default().to_toml().unwrap(), "x").unwrap();
        // `data.mean`, `data.std`, `[diml]`, `[similarity_mining]` and `[avsl]` were added after
        // the first runs were written.
        let data = table["data"].as_table_mut().unwrap();
        data.remove("mean");
        data.remove("std");
        table.remove("diml");
        table.remove("similarity_mining");
        table.remove("avsl");
        let old = TrainConfig::from_table(table, None).unwrap();
        assert_eq!(old.data.mean, dml_data::transform::IMAGENET_MEAN);
        assert_eq!(old.data.std, dml_data::transform::IMAGENET_STD);
        assert!(!old.diml.enabled);
        assert!(!old.similarity_mining.enabled);
        assert!(!old.avsl.enabled);
        assert_eq!(old.to_toml().unwrap(), TrainConfig::default().to_toml().unwrap());
    }

    #[test]
    fn schedule_steps() {
        let s = ScheduleConfig {
            step_epochs: 2,
            gamma: 0.1,
        };
        let f: Vec<f64> = (0..5).map(|e| s.factor(e)).collect();
        assert_eq!(f[0], 1.0);
        assert_eq!(f[1], 1.0);
        assert!((f[2] - 0.1).abs() < 1e-12 && (f[4] - 0.01).abs() < 1e-12);
    }
}
