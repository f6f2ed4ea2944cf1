//! The run configuration: the embedded default, a user TOML file and command-line
//! overrides, merged as TOML tables ([`overlay`]) and then checked into typed structs
//! ([`TrainConfig`], its [`sections`] and the method sections [`DimlConfig`], [`AvslConfig`]
//! and `dml_explain::SimilarityMiningConfig`), whose value ranges [`validate`] checks.

use std::path::{Path, PathBuf};

use dml_losses::{LossConfig, MarginLossConfig, MinerConfig};

use crate::error::TrainError;

mod avsl;
mod culprit;
mod diml;
mod mining;
mod overlay;
pub mod paper_miner;
mod resume;
mod sections;
mod validate;

pub use avsl::{AvslConfig, SUPPORTED as AVSL_SUPPORTED};
pub use diml::{DimlConfig, MarginalsName, SUPPORTED as DIML_SUPPORTED};
pub use mining::{SUPPORTED as MINING_SUPPORTED, tuple_kind};
pub use overlay::{Shortcuts, apply_override, merge, parse_table};
pub use resume::{RESUME_MAY_CHANGE, changed_keys};
pub use sections::{
    DataConfig, EvalConfig, LoopConfig, ModelConfig, OptimizerConfig, OptimizerKind, ScheduleConfig, SelectBy,
};

/// Every loss name `loss.name` (and the `--loss` shortcut) accepts.
pub fn loss_names() -> &'static [&'static str] {
    LossConfig::names()
}

use culprit::describe_error;
use overlay::{expand_miner_shorthand, overlay, read_table};

/// The embedded default configuration (`assets/configs/default.toml`).
pub const DEFAULT_TOML: &str = include_str!("../../../../assets/configs/default.toml");

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
        pub diml: DimlConfig = DimlConfig::default(),
        /// Similarity mining (Zheng et al., Eq. 3): `L = L_ml + γ L_sm`.
        pub similarity_mining: dml_explain::SimilarityMiningConfig = dml_explain::SimilarityMiningConfig::default(),
        /// AVSL (Zhang et al.): the multi-level similarity graph in training and evaluation.
        pub avsl: AvslConfig = AvslConfig::default(),
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
        let changed = changed_keys(&saved_config.to_table()?, &given.to_table()?, RESUME_MAY_CHANGE);
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
        let default = paper_miner::paper_miner(self.loss.name());
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

    /// The resolved configuration as a TOML table (what [`changed_keys`] compares).
    pub fn to_table(&self) -> Result<toml::Table, TrainError> {
        parse_table(&self.to_toml()?, "configuration")
    }

    /// The run directory `run_dir/name`.
    pub fn run_path(&self) -> PathBuf {
        self.run_dir.join(&self.name)
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
        assert_eq!(c.miner, paper_miner::paper_miner("triplet_margin"));
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
