//! Keyed random streams: every draw of a rendered set comes from a generator keyed by the seed,
//! a stream tag and an index, so images can be drawn and rendered in any order, in parallel,
//! and still come out byte-identical.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// A ChaCha8 generator keyed by the seed, a stream tag and an index. ChaCha is a
/// pseudo-random function of its key, so distinct keys give independent streams.
pub(crate) fn keyed_rng(seed: u64, stream: u64, index: u64) -> ChaCha8Rng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&stream.to_le_bytes());
    key[16..24].copy_from_slice(&index.to_le_bytes());
    ChaCha8Rng::from_seed(key)
}

/// The class of every image of a set of `n` images over `classes` classes: a shuffle (keyed by
/// `seed` and `stream`) of `0, 1, …, classes − 1, 0, 1, …`, so every class gets `n / classes`
/// or one more images while each image's class stays uniform and independent of its other
/// draws.
pub(crate) fn balanced_classes(seed: u64, stream: u64, n: usize, classes: usize) -> Vec<usize> {
    use rand::seq::SliceRandom;
    let mut class_of: Vec<usize> = (0..n).map(|i| i % classes).collect();
    class_of.shuffle(&mut keyed_rng(seed, stream, 0));
    class_of
}
