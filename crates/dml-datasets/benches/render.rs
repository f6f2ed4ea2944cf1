//! Rendering throughput of the two synthetic sets, one measurement line (`dml_testkit::bench`,
//! id `render/<set>_<size>px`, seconds per image) per set and size: 256 images rendered (image
//! and mask, not encoded) in parallel on every core, as `generate` does.
//!
//! Run: `cargo bench -p dml-datasets --bench render`.

use std::time::Instant;

use rayon::prelude::*;

const IMAGES: usize = 256;

fn measure(id: &str, size: u32, render: impl Fn(usize) -> usize + Sync) {
    // One warm-up image, then the timed batch.
    render(0);
    let start = Instant::now();
    let pixels: usize = (0..IMAGES).into_par_iter().map(&render).sum();
    let seconds = start.elapsed().as_secs_f64() / IMAGES as f64;
    assert_eq!(pixels, IMAGES * (size * size) as usize);
    dml_testkit::bench::emit(
        id,
        seconds,
        "image rendered with its mask",
        serde_json::json!({
            "size": size,
            "images": IMAGES,
            "threads": rayon::current_num_threads(),
            "images_per_second": 1.0 / seconds,
        }),
    );
}

fn main() {
    let shapes = dml_datasets::synth::plan(0, IMAGES);
    let parts = dml_datasets::synth::parts::plan(0, IMAGES);
    for size in [64u32, 128] {
        measure(&format!("render/shapes_{size}px"), size, |i| {
            let (image, mask) = dml_datasets::synth::render_with_mask(&shapes[i], size);
            assert_eq!(image.dimensions(), mask.dimensions());
            mask.len()
        });
        measure(&format!("render/parts_{size}px"), size, |i| {
            let (image, mask) = dml_datasets::synth::parts::render(&parts[i], size);
            assert_eq!(image.dimensions(), mask.dimensions());
            mask.len()
        });
    }
}
