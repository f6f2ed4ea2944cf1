//! Value ranges of a configuration that serde cannot express, each error naming its key.

use crate::error::TrainError;

use super::TrainConfig;

impl TrainConfig {
    /// Checks value ranges that serde cannot express.
    pub fn validate(&self) -> Result<(), TrainError> {
        let fail = |key: &str, why: String| Err(TrainError::Config(format!("{key}: {why}")));
        crate::device::parse_device(&self.device)?;
        self.diml.validate(&self.loss)?;
        super::mining::validate(&self.similarity_mining, &self.loss, &self.diml)?;
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
        if self.data.eval_resize != 0 && self.data.eval_resize < self.data.image_size {
            return fail(
                "data.eval_resize",
                format!(
                    "{} is below data.image_size {}: the centre crop needs a side at least that long (0: the image size)",
                    self.data.eval_resize, self.data.image_size
                ),
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
