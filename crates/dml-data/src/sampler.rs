//! Batch samplers: which dataset items form each batch of an epoch.

use std::collections::BTreeMap;

use rand::SeedableRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand_chacha::ChaCha8Rng;

use crate::dataset::mix;
use crate::error::DataError;

/// Produces the batches (lists of dataset item indices) of an epoch. The same seed and
/// epoch always give the same batches.
pub trait BatchSampler: Send + Sync {
    /// The batches of epoch `epoch`.
    fn batches(&self, epoch: u64) -> Vec<Vec<usize>>;
}

/// pytorch-metric-learning's `MPerClassSampler`: every batch holds `m` images of each of
/// `batch_size / m` distinct classes; a class with fewer than `m` images is sampled with
/// replacement, otherwise without. An epoch has `samples_per_epoch / batch_size` batches
/// (PML's `length_before_new_iter`).
#[derive(Debug, Clone)]
pub struct MPerClassSampler {
    by_class: Vec<Vec<usize>>,
    m: usize,
    batch_size: usize,
    samples_per_epoch: usize,
    seed: u64,
}

impl MPerClassSampler {
    /// A sampler over items with class ids `labels`.
    ///
    /// Errors when `m` is zero, `batch_size` is not a positive multiple of `m`, there are
    /// fewer than `batch_size / m` classes, or the epoch is shorter than one batch.
    pub fn new(
        labels: &[u32],
        m: usize,
        batch_size: usize,
        samples_per_epoch: usize,
        seed: u64,
    ) -> Result<Self, DataError> {
        if m == 0 || batch_size == 0 || !batch_size.is_multiple_of(m) {
            return Err(DataError::Config(format!(
                "batch size {batch_size} must be a positive multiple of m = {m}"
            )));
        }
        let mut classes: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (item, &label) in labels.iter().enumerate() {
            classes.entry(label).or_default().push(item);
        }
        if classes.len() < batch_size / m {
            return Err(DataError::Config(format!(
                "batch size {batch_size} with m = {m} needs {} classes, but the data has {}",
                batch_size / m,
                classes.len()
            )));
        }
        if samples_per_epoch < batch_size {
            return Err(DataError::Config(format!(
                "samples per epoch {samples_per_epoch} is smaller than one batch ({batch_size})"
            )));
        }
        Ok(Self {
            by_class: classes.into_values().collect(),
            m,
            batch_size,
            samples_per_epoch,
            seed,
        })
    }
}

impl BatchSampler for MPerClassSampler {
    fn batches(&self, epoch: u64) -> Vec<Vec<usize>> {
        let mut rng = ChaCha8Rng::seed_from_u64(mix(self.seed, epoch));
        let classes_per_batch = self.batch_size / self.m;
        let mut order: Vec<usize> = (0..self.by_class.len()).collect();
        (0..self.samples_per_epoch / self.batch_size)
            .map(|_| {
                order.shuffle(&mut rng);
                let mut batch = Vec::with_capacity(self.batch_size);
                for &class in &order[..classes_per_batch] {
                    let items = &self.by_class[class];
                    if items.len() >= self.m {
                        batch.extend(items.choose_multiple(&mut rng, self.m).copied());
                    } else {
                        batch.extend((0..self.m).map(|_| *items.choose(&mut rng).expect("classes are non-empty")));
                    }
                }
                batch
            })
            .collect()
    }
}

/// Plain batches: every item once per epoch, shuffled (or in order), cut into batches.
#[derive(Debug, Clone)]
pub struct ShuffledSampler {
    len: usize,
    batch_size: usize,
    shuffle: bool,
    drop_last: bool,
    seed: u64,
}

impl ShuffledSampler {
    /// A sampler over `len` items. `drop_last` drops a final incomplete batch (training);
    /// evaluation keeps it and uses `shuffle = false`.
    pub fn new(len: usize, batch_size: usize, shuffle: bool, drop_last: bool, seed: u64) -> Result<Self, DataError> {
        if batch_size == 0 {
            return Err(DataError::Config("batch size must be positive".into()));
        }
        Ok(Self {
            len,
            batch_size,
            shuffle,
            drop_last,
            seed,
        })
    }
}

impl BatchSampler for ShuffledSampler {
    fn batches(&self, epoch: u64) -> Vec<Vec<usize>> {
        let mut items: Vec<usize> = (0..self.len).collect();
        if self.shuffle {
            items.shuffle(&mut ChaCha8Rng::seed_from_u64(mix(self.seed, epoch)));
        }
        items
            .chunks(self.batch_size)
            .filter(|chunk| !self.drop_last || chunk.len() == self.batch_size)
            .map(<[usize]>::to_vec)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn m_per_class_batches_have_m_of_each_class() {
        // Classes 0..6 with 5 images each, class 6 with only 2 (sampled with replacement).
        let mut labels: Vec<u32> = (0..30).map(|i| i / 5).collect();
        labels.extend([6, 6]);
        let sampler = MPerClassSampler::new(&labels, 4, 12, 120, 7).unwrap();
        let batches = sampler.batches(0);
        assert_eq!(batches.len(), 10);
        let mut seen_small_class = false;
        for batch in &batches {
            assert_eq!(batch.len(), 12);
            let mut per_class: HashMap<u32, Vec<usize>> = HashMap::new();
            for &i in batch {
                per_class.entry(labels[i]).or_default().push(i);
            }
            assert_eq!(per_class.len(), 3, "{batch:?}");
            for (class, items) in per_class {
                assert_eq!(items.len(), 4);
                if class == 6 {
                    seen_small_class = true;
                } else {
                    // Classes with at least m images are sampled without replacement.
                    let mut unique = items.clone();
                    unique.sort_unstable();
                    unique.dedup();
                    assert_eq!(unique.len(), 4, "{items:?}");
                }
            }
        }
        assert!(seen_small_class);
        // Deterministic per (seed, epoch), different across epochs and seeds.
        assert_eq!(sampler.batches(0), batches);
        assert_ne!(sampler.batches(1), batches);
        assert_ne!(
            MPerClassSampler::new(&labels, 4, 12, 120, 8).unwrap().batches(0),
            batches
        );
    }

    #[test]
    fn m_per_class_rejects_bad_configs() {
        let labels = [0u32, 0, 1, 1];
        assert!(
            MPerClassSampler::new(&labels, 3, 8, 100, 0)
                .unwrap_err()
                .to_string()
                .contains("multiple of m")
        );
        let e = MPerClassSampler::new(&labels, 2, 6, 100, 0).unwrap_err().to_string();
        assert!(e.contains("needs 3 classes") && e.contains("has 2"), "{e}");
        assert!(MPerClassSampler::new(&labels, 2, 4, 3, 0).is_err());
    }

    #[test]
    fn shuffled_covers_every_item_once() {
        let s = ShuffledSampler::new(10, 4, true, false, 1).unwrap();
        let batches = s.batches(0);
        assert_eq!(batches.iter().map(Vec::len).collect::<Vec<_>>(), vec![4, 4, 2]);
        let mut all: Vec<usize> = batches.concat();
        assert_ne!(all, (0..10).collect::<Vec<_>>(), "shuffled");
        all.sort_unstable();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        let dropped = ShuffledSampler::new(10, 4, false, true, 1).unwrap().batches(0);
        assert_eq!(dropped, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
    }
}
