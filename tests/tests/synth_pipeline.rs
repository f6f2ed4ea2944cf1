//! End to end on the synthetic set: `cargo xtask synth` → manifest with property columns
//! → M-per-class batches with training augmentation through the prefetching loader.

use std::collections::BTreeMap;
use std::sync::Arc;

use clap::Parser;
use dml_data::{
    BatchLoader, BatchSampler, ImageDataset, LoaderConfig, MPerClassSampler, Manifest, Pipeline, Split, TransformConfig,
};

#[test]
fn synthetic_set_feeds_m_per_class_training_batches() {
    let out = std::env::temp_dir().join(format!("dml-e2e-synth-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let cli = xtask::Cli::try_parse_from([
        "xtask",
        "synth",
        "--n",
        "200",
        "--seed",
        "4",
        "--out",
        out.to_str().unwrap(),
    ])
    .unwrap();
    xtask::run(cli).unwrap();
    let manifest = Manifest::read(out.join("manifest.csv")).unwrap();
    assert_eq!(manifest.records.len(), 200);
    for column in [
        "rotation",
        "object_hue",
        "background_value",
        "light_elevation",
        "light_azimuth",
        "camera_height",
    ] {
        assert!(
            manifest.property_names.iter().any(|p| p == column),
            "missing column {column}"
        );
    }

    let pipeline = Pipeline::new(TransformConfig::train(48)).unwrap();
    let dataset = Arc::new(ImageDataset::new(Arc::new(manifest), &[Split::Train], pipeline));
    assert_eq!(dataset.len(), 100, "classes 0–4 of 10, balanced");
    let sampler = MPerClassSampler::new(dataset.labels(), 4, 16, 64, 1).unwrap();
    let batches = sampler.batches(0);
    let loaded: Vec<_> = BatchLoader::new(
        dataset.clone(),
        batches.clone(),
        7,
        &LoaderConfig {
            threads: 2,
            prefetch: 2,
        },
    )
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap();
    assert_eq!(loaded.len(), 4);
    for (batch, items) in loaded.iter().zip(&batches) {
        assert_eq!(batch.shape, [16, 3, 48, 48]);
        assert_eq!(&batch.items, items);
        let mut per_class: BTreeMap<u32, usize> = BTreeMap::new();
        batch.labels.iter().for_each(|&l| *per_class.entry(l).or_default() += 1);
        assert_eq!(per_class.len(), 4);
        assert!(per_class.values().all(|&c| c == 4) && per_class.keys().all(|&c| c < 5));
        // ImageNet-normalised pixels stay within the range of normalised [0, 1] values.
        assert!(batch.images.iter().all(|v| v.is_finite() && (-2.2..=2.7).contains(v)));
    }
    let _ = std::fs::remove_dir_all(&out);
}
