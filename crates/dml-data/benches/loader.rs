//! Decoding + augmentation throughput at 224², printed as JSON.
//!
//! Writes 192 JPEG photographs-sized images (500 × 375, quality 90, textured so that they
//! compress like photos) to a temporary dataset, then loads three epochs of batches of 32
//! with the training transform (random-resized-crop 224, flip, ImageNet normalisation)
//! on 1 and 2 decoding threads.
//!
//! Run: `cargo bench -p dml-data --bench loader`

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

    let mut results = Vec::new();
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
        results.push(format!(
            "{{\"threads\":{threads},\"images\":{images},\"seconds\":{seconds:.3},\"images_per_second\":{:.1}}}",
            images as f64 / seconds
        ));
    }
    println!(
        "{{\"bench\":\"dml-data loader\",\"source\":\"500x375 JPEG q90, mean {} KB\",\"transform\":\"random-resized-crop 224 + flip + normalise\",\"batch\":{BATCH},\"runs\":[{}]}}",
        bytes_total / IMAGES / 1024,
        results.join(",")
    );
    let _ = std::fs::remove_dir_all(&dir);
}
