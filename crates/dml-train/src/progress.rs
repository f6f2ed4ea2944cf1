//! How a run reports progress without printing: the library calls a [`Progress`] the caller
//! provides (the command line draws bars and prints lines; tests pass [`Silent`]).

use crate::metrics::MetricsRecord;

/// Something a long operation tells its caller while it runs.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// A note for the user: a dataset being generated, pretrained weights loaded, a run resumed, a
    /// fallback taken (`best` without a `val` split means the latest checkpoint).
    Note(&'a str),
    /// A training run evaluated its model (epoch 0 is the untrained model).
    Evaluated(&'a MetricsRecord),
    /// A training epoch finished without an evaluation (`eval.every` skipped it).
    EpochDone {
        /// Epochs completed (1-based).
        epoch: usize,
        /// Epochs of the run.
        epochs: usize,
        /// The epoch's mean training loss.
        loss: f64,
        /// Training throughput in images per second.
        images_per_sec: f64,
    },
}

/// One bar of steps (an epoch's batches, the images of an analysis).
pub trait Bar {
    /// One more step is done; `message` (e.g. `loss 0.1234 · 812 img/s`) replaces the last one.
    fn step(&self, message: Option<&str>);
    /// The bar is done (the command line clears it).
    fn finish(&self);
}

/// The receiver of a run's events and bars.
pub trait Progress: Sync {
    /// Reports `event`.
    fn event(&self, event: Event<'_>);
    /// A bar of `len` steps labelled `label` (`epoch 3/6`, `saliency`).
    fn bar(&self, len: usize, label: &str) -> Box<dyn Bar + '_>;
    /// Reports a [`Event::Note`].
    fn note(&self, text: &str) {
        self.event(Event::Note(text));
    }
}

/// A [`Progress`] that ignores everything: for tests and for callers that only want the result.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Bar for Silent {
    fn step(&self, _message: Option<&str>) {}
    fn finish(&self) {}
}

impl Progress for Silent {
    fn event(&self, _event: Event<'_>) {}
    fn bar(&self, _len: usize, _label: &str) -> Box<dyn Bar + '_> {
        Box::new(Silent)
    }
}
