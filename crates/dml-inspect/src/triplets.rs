//! Random test triplets (anchor, positive, negative) of a split, drawn by seed; shared by `explain
//! faithfulness` and `explain benchmark`.

use std::collections::BTreeMap;

use dml_data::Manifest;
use rand::Rng;

/// The images of `indices` by class, keeping the classes with at least two images (a triplet's
/// anchor and positive).
pub(crate) fn classes_with_pairs(manifest: &Manifest, indices: &[usize]) -> BTreeMap<u32, Vec<usize>> {
    let mut m: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for &i in indices {
        m.entry(manifest.records[i].class_id).or_default().push(i);
    }
    m.retain(|_, v| v.len() >= 2);
    m
}

/// A random triplet (anchor, positive, negative) of manifest indices: two distinct images of one
/// class and one image of another.
pub(crate) fn draw_triplet(rng: &mut impl Rng, by_class: &BTreeMap<u32, Vec<usize>>, classes: &[u32]) -> [usize; 3] {
    let ci = rng.random_range(0..classes.len());
    let mut cj = rng.random_range(0..classes.len() - 1);
    if cj >= ci {
        cj += 1;
    }
    let same = &by_class[&classes[ci]];
    let other = &by_class[&classes[cj]];
    let a = same[rng.random_range(0..same.len())];
    let mut p = same[rng.random_range(0..same.len() - 1)];
    if p == a {
        p = same[same.len() - 1];
    }
    let n = other[rng.random_range(0..other.len())];
    [a, p, n]
}
