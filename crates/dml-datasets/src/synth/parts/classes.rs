//! The classes of the parts set: combinations of part types, chosen in pairs that differ in a
//! single slot, and their zero-shot split.
//!
//! Of the 5⁴ = 625 combinations of [`PartType::ALL`] over [`Slot::ALL`], [`CLASSES`] are used.
//! They are drawn as [`CLASSES`]` / 2` *sibling pairs*: a combination and one of its neighbours
//! that differs from it in exactly one slot, the two always in the same split. So every class
//! has at least one class of its own split that differs from it in one part only, which is what
//! makes the set fine-grained (two sparrows that differ by the beak), and a model must look at
//! that part to tell them apart.
//!
//! The first half of the pairs is the `train` split, the second the `test` split; since each
//! half holds 64 classes and every slot has 5 types, every (slot, type) occurs in both halves
//! (checked by a test), so the test classes are new combinations of known parts.
//!
//! The table is a constant of the set (drawn from a fixed key, not from the dataset's seed), so
//! class ids and names mean the same in every set.

use rand::Rng;
use rand::seq::SliceRandom;

use super::vocabulary::{PartType, Slot};
use crate::synth::keyed::keyed_rng;

/// Number of classes.
pub const CLASSES: usize = 128;
/// Number of classes of the `train` split: the first class ids; the rest are `test`.
pub const TRAIN_CLASSES: usize = CLASSES / 2;

/// The part type in every slot of one class, indexed by [`Slot::index`].
pub type Combination = [PartType; 4];

/// Key of the class table's random stream: a constant, so the table is the same for every seed.
const TABLE_KEY: u64 = 0x0050_4152_5453; // "PARTS" in ASCII

/// The combination of every class, indexed by class id.
///
/// Class `2k` and `2k + 1` are sibling pairs: they differ in exactly one slot.
pub fn class_table() -> &'static [Combination] {
    static TABLE: std::sync::OnceLock<Vec<Combination>> = std::sync::OnceLock::new();
    TABLE.get_or_init(draw_table)
}

/// Draws the sibling pairs: the combinations in a shuffled order are anchors in turn; an anchor
/// not used yet gets a random unused neighbour (one slot changed), and the two become a pair.
fn draw_table() -> Vec<Combination> {
    let types = PartType::ALL.len();
    let mut rng = keyed_rng(TABLE_KEY, 0, 0);
    let mut all: Vec<Combination> = (0..types.pow(4))
        .map(|i| std::array::from_fn(|slot| PartType::ALL[i / types.pow(slot as u32) % types]))
        .collect();
    all.shuffle(&mut rng);
    let mut used: Vec<Combination> = Vec::with_capacity(CLASSES);
    for anchor in &all {
        if used.len() == CLASSES {
            break;
        }
        if used.contains(anchor) {
            continue;
        }
        let neighbours: Vec<Combination> = neighbours(anchor).filter(|c| !used.contains(c)).collect();
        if neighbours.is_empty() {
            continue;
        }
        let sibling = neighbours[rng.random_range(0..neighbours.len())];
        used.push(*anchor);
        used.push(sibling);
    }
    used
}

/// Every combination that differs from `c` in exactly one slot.
pub fn neighbours(c: &Combination) -> impl Iterator<Item = Combination> + '_ {
    Slot::ALL.into_iter().flat_map(move |slot| {
        PartType::ALL
            .into_iter()
            .filter(move |&t| t != c[slot.index()])
            .map(move |t| {
                let mut n = *c;
                n[slot.index()] = t;
                n
            })
    })
}

/// The class name written to the manifest: the types of the slots in [`Slot::ALL`] order,
/// joined by `-` (e.g. `cone-none-plate-ring`: a cone crest, no front piece, plate sides and a
/// ring tail).
pub fn class_name(c: &Combination) -> String {
    c.iter().map(|t| t.name()).collect::<Vec<_>>().join("-")
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn classes_are_distinct_sibling_pairs() {
        let table = class_table();
        assert_eq!(table.len(), CLASSES);
        let distinct: HashSet<_> = table.iter().collect();
        assert_eq!(distinct.len(), CLASSES, "a combination is used twice");
        for pair in table.chunks(2) {
            let differing = Slot::ALL.iter().filter(|s| pair[0][s.index()] != pair[1][s.index()]);
            assert_eq!(
                differing.count(),
                1,
                "{} / {}",
                class_name(&pair[0]),
                class_name(&pair[1])
            );
        }
    }

    /// The zero-shot promise: test classes are unseen combinations of seen parts.
    #[test]
    fn every_part_type_occurs_in_both_splits() {
        let (train, test) = class_table().split_at(TRAIN_CLASSES);
        for slot in Slot::ALL {
            for part in PartType::ALL {
                for (split, classes) in [("train", train), ("test", test)] {
                    let n = classes.iter().filter(|c| c[slot.index()] == part).count();
                    assert!(n >= 3, "{slot}={part} occurs {n} times in {split}");
                }
            }
        }
    }

    #[test]
    fn names_are_unique_and_readable() {
        let names: HashSet<String> = class_table().iter().map(class_name).collect();
        assert_eq!(names.len(), CLASSES);
        assert!(names.iter().all(|n| n.split('-').count() == 4 && !n.contains(',')));
    }
}
