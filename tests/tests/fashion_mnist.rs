//! End to end on real data: `cargo xtask prepare fashion-mnist` on Debian's package, the
//! manifest read back and validated, images loaded through the prefetching loader, and
//! retrieval metrics of raw-pixel embeddings on the unseen classes 5–9.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Parser;
use dml_data::{
    BatchLoader, BatchSampler, ImageDataset, LoaderConfig, Manifest, Pipeline, ShuffledSampler, Split, TransformConfig,
};
use dml_eval::{AccuracyConfig, Distance, EvalSets, Metric, evaluate};

const SOURCE: &str = "/usr/share/datasets/fashion-mnist";

/// Returns false (and says why) when the Debian package is missing outside CI; under CI
/// a missing package is a failure, because `.ci/run` installs it.
fn source_available() -> bool {
    if Path::new(SOURCE).is_dir() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{SOURCE} is missing: apt-get install dataset-fashion-mnist"
    );
    eprintln!("skipping: {SOURCE} is missing (apt-get install dataset-fashion-mnist)");
    false
}

fn prepare(out: &Path) -> Manifest {
    let cli = xtask::Cli::try_parse_from([
        "xtask",
        "prepare",
        "fashion-mnist",
        "--out",
        out.to_str().unwrap(),
        "--force",
    ])
    .unwrap();
    xtask::run(cli).unwrap();
    Manifest::read(out.join("manifest.csv")).unwrap()
}

#[test]
fn prepared_fashion_mnist_loads_and_raw_pixels_retrieve_unseen_classes() {
    if !source_available() {
        return;
    }
    let out: PathBuf = std::env::temp_dir().join(format!("dml-e2e-fashion-mnist-{}", std::process::id()));
    let manifest = prepare(&out);

    // The documented split: 70,000 images, classes 0–4 train and 5–9 test, 7,000 each.
    assert_eq!(manifest.records.len(), 70_000);
    let counts = manifest.split_counts();
    assert_eq!(counts.get(&Split::Train), Some(&35_000));
    assert_eq!(counts.get(&Split::Test), Some(&35_000));
    for record in &manifest.records {
        assert_eq!(record.split == Split::Train, record.class_id < 5, "{record:?}");
    }
    let mut per_class = [0usize; 10];
    manifest
        .records
        .iter()
        .for_each(|r| per_class[r.class_id as usize] += 1);
    assert_eq!(per_class, [7_000; 10]);

    // Load the first 3,000 test images through the parallel loader, in order.
    let pipeline = Pipeline::new(TransformConfig {
        mean: [0.0; 3],
        std: [1.0; 3],
        ..TransformConfig::identity()
    })
    .unwrap();
    let dataset = Arc::new(ImageDataset::new(Arc::new(manifest), &[Split::Test], pipeline));
    let n = 3_000;
    let batches: Vec<Vec<usize>> = ShuffledSampler::new(n, 256, false, false, 0).unwrap().batches(0);
    let mut embeddings = Vec::with_capacity(n * 784);
    let mut labels = Vec::with_capacity(n);
    for batch in BatchLoader::new(
        dataset.clone(),
        batches,
        0,
        &LoaderConfig {
            threads: 2,
            prefetch: 2,
        },
    )
    .unwrap()
    {
        let batch = batch.unwrap();
        assert_eq!(&batch.shape[1..], &[3, 28, 28]);
        // Grayscale images become three equal channels; one is enough as an embedding.
        for image in batch.images.chunks(3 * 784) {
            assert_eq!(image[..784], image[784..2 * 784]);
            embeddings.extend_from_slice(&image[..784]);
        }
        labels.extend(batch.labels);
    }
    assert_eq!(labels.len(), n);
    assert!(labels.iter().all(|&l| (5..10).contains(&l)));

    // Raw pixels already retrieve Fashion-MNIST's unseen classes well above chance
    // (0.2 for five balanced classes); a broken decode, label or metric would not.
    let view = dml_eval::Embeddings::new(&embeddings, n, 784).unwrap();
    let config = AccuracyConfig::new(Distance::Euclidean).with_metrics(vec![
        Metric::PrecisionAt1,
        Metric::MeanAveragePrecisionAtR,
        Metric::RecallAt(4),
    ]);
    let report = evaluate(
        &EvalSets::QueryIsReference {
            embeddings: view,
            labels: &labels,
        },
        &config,
    )
    .unwrap();
    let p1 = report.precision_at_1.unwrap();
    let map_r = report.mean_average_precision_at_r.unwrap();
    eprintln!("raw pixels, 3,000 test images: P@1 {p1:.4}, MAP@R {map_r:.4}");
    assert!(p1 > 0.75 && p1 < 1.0, "P@1 {p1}");
    assert!(map_r > 0.3 && map_r < p1, "MAP@R {map_r}");
    assert!(report.recall_at_k[&4] >= p1);
    let _ = std::fs::remove_dir_all(&out);
}
