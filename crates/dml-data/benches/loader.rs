//! Decoding + augmentation throughput at 224², one measurement line (`dml_testkit::bench`, id
//! `loader/224_t<threads>`, seconds per image) per thread count.
//!
//! Writes 192 JPEG photographs-sized images (500 × 375, quality 90, textured so that they
//! compress like photos) to a temporary dataset, then loads three epochs of batches of 32
//! with the training transform (random-resized-crop 224, flip, ImageNet normalisation)
//! on 1 and 2 decoding threads.
//!
//! Run: `cargo bench -p dml-data --bench loader`; `cargo xtask bench --peers` loads the same
//! kind of images with torchvision's transforms and a PyTorch `DataLoader` (`xtask/peers/loader.py`).

use std::sync::Arc;
use std::time::Instant;

use dml_data::{
    BatchLoader, BatchSampler, ImageDataset, LoaderConfig, Manifest, Pipeline, Record, ShuffledSampler, Split,
    TransformConfig,
};
use image::codecs::jpeg::JpegEncoder;

const IMAGES: usize = 192;
const BATCH: usize = 32;
const EPOCHS: u64 = 3;

fn main() {
    let dir = std::env::temp_dir().join(format!("dml-data-bench-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("images")).expect("temp dir");
    let mut manifest = Manifest::new(&dir, vec![]);
    let mut bytes_total = 0usize;
    for i in 0..IMAGES {
        let img = image::RgbImage::from_fn(500, 375, |x, y| {
            // Smooth gradients plus a deterministic hash texture: realistic JPEG entropy.
            let h =
                (x.wrapping_mul(73_856_093) ^ y.wrapping_mul(19_349_663) ^ (i as u32).wrapping_mul(83_492_791)) % 13;
            image::Rgb([
                ((x / 2 + i as u32 * 7) % 256) as u8,
                ((y * 2 / 3 + h) % 256) as u8,
                (((x + y) / 4 + h * 2) % 256) as u8,
            ])
        });
        let path = format!("images/{i:04}.jpg");
        let mut buffer = Vec::new();
        JpegEncoder::new_with_quality(&mut buffer, 90)
            .encode_image(&img)
            .expect("encode");
        bytes_total += buffer.len();
        std::fs::write(dir.join(&path), buffer).expect("write");
        manifest.records.push(Record {
            path,
            class_id: (i % 8) as u32,
            class_name: format!("c{}", i % 8),
            split: Split::Train,
            properties: vec![],
        });
    }
    let pipeline = Pipeline::new(TransformConfig::train(224)).expect("pipeline");
    let dataset = Arc::new(ImageDataset::new(Arc::new(manifest), &[Split::Train], pipeline));
    let sampler = ShuffledSampler::new(IMAGES, BATCH, true, true, 0).expect("sampler");

    let source_kb = bytes_total / IMAGES / 1024;
    for threads in [1usize, 2] {
        let config = LoaderConfig { threads, prefetch: 2 };
        // One warm-up epoch so that the page cache holds the files in both runs.
        for batch in BatchLoader::new(dataset.clone(), sampler.batches(99), 0, &config).expect("loader") {
            batch.expect("batch");
        }
        let start = Instant::now();
        let mut images = 0usize;
        for epoch in 0..EPOCHS {
            for batch in BatchLoader::new(dataset.clone(), sampler.batches(epoch), epoch, &config).expect("loader") {
                images += batch.expect("batch").shape[0];
            }
        }
        let seconds = start.elapsed().as_secs_f64();
        dml_testkit::bench::emit(
            &format!("loader/224_t{threads}"),
            seconds / images as f64,
            "image decoded and augmented",
            serde_json::json!({
                "source": format!("500x375 JPEG q90, mean {source_kb} KB"),
                "transform": "random-resized-crop 224 + flip + normalise",
                "batch": BATCH,
                "threads": threads,
                "images": images,
                "images_per_second": images as f64 / seconds,
            }),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
