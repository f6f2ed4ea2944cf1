//! Parallel, prefetching batch loading.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use crate::dataset::{Batch, ImageDataset, mix};
use crate::error::DataError;

dml_config::config! {
    /// How batches are decoded.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct LoaderConfig {
        /// Decoding threads (0 = one per available core).
        pub threads: usize = 0,
        /// Batches decoded ahead of the consumer.
        pub prefetch: usize = 2,
    }
}

/// An iterator over the batches of one epoch, decoded on a private thread pool while the
/// consumer works on earlier batches.
///
/// Batches arrive in the order given. Batch `b` is augmented with the seed
/// `mix(seed, b)`, so the pixels depend only on the seed and the batch list, never on
/// the thread count or timing. The first decoding error ends the iteration after being
/// yielded. Dropping the loader stops the background work.
pub struct BatchLoader {
    receiver: Option<Receiver<Result<Batch, DataError>>>,
    worker: Option<JoinHandle<()>>,
    remaining: usize,
}

impl BatchLoader {
    /// Starts decoding `batches` of `dataset` in the background.
    pub fn new(
        dataset: Arc<ImageDataset>,
        batches: Vec<Vec<usize>>,
        seed: u64,
        config: &LoaderConfig,
    ) -> Result<Self, DataError> {
        Self::from_batch(dataset, batches, 0, seed, config)
    }

    /// [`BatchLoader::new`] yielding the batches from index `first` on, each with the pixels it
    /// has in the whole list (its augmentation is keyed by its index `b`, not by its position in
    /// what is yielded): an epoch resumed after `first` steps sees what it would have seen.
    pub fn from_batch(
        dataset: Arc<ImageDataset>,
        batches: Vec<Vec<usize>>,
        first: usize,
        seed: u64,
        config: &LoaderConfig,
    ) -> Result<Self, DataError> {
        if let Some(&bad) = batches.iter().flatten().find(|&&i| i >= dataset.len()) {
            return Err(DataError::Config(format!(
                "batch item {bad} is out of range for a dataset of {} images",
                dataset.len()
            )));
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(config.threads)
            .thread_name(|i| format!("dml-data-decode-{i}"))
            .build()
            .map_err(|e| DataError::Config(format!("cannot start {} decoding threads: {e}", config.threads)))?;
        let (sender, receiver) = sync_channel(config.prefetch.max(1));
        let remaining = batches.len().saturating_sub(first);
        let worker = std::thread::Builder::new()
            .name("dml-data-loader".into())
            .spawn(move || produce(&pool, &dataset, batches, first, seed, sender))
            .map_err(|e| DataError::Config(format!("cannot start the loader thread: {e}")))?;
        Ok(Self {
            receiver: Some(receiver),
            worker: Some(worker),
            remaining,
        })
    }
}

fn produce(
    pool: &rayon::ThreadPool,
    dataset: &ImageDataset,
    batches: Vec<Vec<usize>>,
    first: usize,
    seed: u64,
    sender: SyncSender<Result<Batch, DataError>>,
) {
    for (b, items) in batches.iter().enumerate().skip(first) {
        let batch = pool.install(|| dataset.batch(items, mix(seed, b as u64)));
        let failed = batch.is_err();
        // A send error means the consumer dropped the loader: stop quietly.
        if sender.send(batch).is_err() || failed {
            return;
        }
    }
}

impl Iterator for BatchLoader {
    type Item = Result<Batch, DataError>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.receiver.as_ref()?.recv().ok();
        match &item {
            Some(Ok(_)) => self.remaining = self.remaining.saturating_sub(1),
            _ => self.remaining = 0,
        }
        item
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.remaining))
    }
}

impl Drop for BatchLoader {
    fn drop(&mut self) {
        // Closing the channel first makes a blocked producer's send fail, so the join
        // below waits for at most the batch being decoded.
        self.receiver.take();
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{Manifest, Record, Split};
    use crate::transform::{Pipeline, TransformConfig};

    fn dataset(tag: &str, n: usize) -> (std::path::PathBuf, Arc<ImageDataset>) {
        let dir = std::env::temp_dir().join(format!("dml-data-loader-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("images")).unwrap();
        let mut manifest = Manifest::new(&dir, vec![]);
        for i in 0..n {
            let img = image::RgbImage::from_fn(40 + i as u32, 30, |x, y| {
                image::Rgb([(x * 5) as u8, (y * 7) as u8, i as u8])
            });
            let path = format!("images/{i}.jpg");
            img.save(dir.join(&path)).unwrap();
            manifest.records.push(Record {
                path,
                class_id: (i % 3) as u32,
                class_name: format!("c{}", i % 3),
                split: Split::Train,
                properties: vec![],
            });
        }
        let pipeline = Pipeline::new(TransformConfig::train(16)).unwrap();
        (
            dir,
            Arc::new(ImageDataset::new(Arc::new(manifest), &[Split::Train], pipeline)),
        )
    }

    #[test]
    fn batches_are_identical_for_any_thread_count() {
        let (_dir, ds) = dataset("threads", 9);
        let batches = vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 8]];
        let run = |threads| {
            BatchLoader::new(ds.clone(), batches.clone(), 5, &LoaderConfig { threads, prefetch: 1 })
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap()
        };
        let one = run(1);
        let two = run(2);
        assert_eq!(one, two);
        assert_eq!(one.len(), 3);
        assert_eq!(one[0].shape, [4, 3, 16, 16]);
        assert_eq!(one[0].labels, vec![0, 1, 2, 0]);
        assert_eq!(one[2].items, vec![8, 8]);
        // The same image drawn twice gets two different augmentations.
        let plane = 3 * 16 * 16;
        assert_ne!(one[2].images[..plane], one[2].images[plane..]);
        // Started after the first batch, the loader yields the rest with the same pixels.
        let rest = BatchLoader::from_batch(ds.clone(), batches.clone(), 1, 5, &LoaderConfig::default())
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        assert_eq!(rest, one[1..]);
    }

    #[test]
    fn corrupt_image_is_reported_with_its_path() {
        let (dir, ds) = dataset("corrupt", 4);
        let bytes = std::fs::read(dir.join("images/2.jpg")).unwrap();
        std::fs::write(dir.join("images/2.jpg"), &bytes[..bytes.len() / 3]).unwrap();
        let results: Vec<_> = BatchLoader::new(
            ds,
            vec![vec![0, 1], vec![2, 3], vec![0, 1]],
            0,
            &LoaderConfig::default(),
        )
        .unwrap()
        .collect();
        assert_eq!(results.len(), 2, "iteration stops after the error");
        assert!(results[0].is_ok());
        let e = results[1].as_ref().unwrap_err().to_string();
        assert!(e.contains("images/2.jpg") && e.contains("decode"), "{e}");
    }

    #[test]
    fn dropping_early_stops_the_worker() {
        let (_dir, ds) = dataset("drop", 6);
        let batches: Vec<Vec<usize>> = (0..50).map(|b| vec![b % 6]).collect();
        let mut loader = BatchLoader::new(
            ds,
            batches,
            0,
            &LoaderConfig {
                threads: 2,
                prefetch: 2,
            },
        )
        .unwrap();
        assert!(loader.next().unwrap().is_ok());
        drop(loader);
    }
}
