//! Counterfactual renders: an image of the set rendered again with one slot's part removed or
//! replaced, everything else — pose, place, colours, light, background, distractors — unchanged.
//!
//! The renderer is a pure function of [`PartsParams`], so a counterfactual is the same
//! parameters with one entry of `parts` changed: the pixels that differ from the original are
//! exactly those the part (and its shadow and shading) touched. A benchmark can then measure how
//! much a model's similarity really depends on each part.

use std::fmt;

use super::scene::PartsParams;
use super::vocabulary::{PartType, Slot};
use crate::error::{DatasetError, Result};

/// One change of one slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edit {
    /// The slot is emptied.
    Remove(Slot),
    /// The slot gets this type (which may be [`PartType::None`], the same as removing it).
    Swap(Slot, PartType),
}

impl Edit {
    /// The slot the edit changes.
    pub fn slot(self) -> Slot {
        match self {
            Edit::Remove(slot) | Edit::Swap(slot, _) => slot,
        }
    }

    /// `params` with the edit applied; the class id is kept (the render is a counterfactual of
    /// that image, not an image of another class).
    pub fn apply(self, params: &PartsParams) -> PartsParams {
        let mut edited = params.clone();
        let (slot, part) = match self {
            Edit::Remove(slot) => (slot, PartType::None),
            Edit::Swap(slot, part) => (slot, part),
        };
        edited.parts[slot.index()] = part;
        edited
    }

    /// The edit `--remove SLOT` names.
    pub fn parse_remove(slot: &str) -> Result<Edit> {
        Ok(Edit::Remove(parse_slot("--remove", slot)?))
    }

    /// The edit `--swap SLOT=TYPE` names.
    pub fn parse_swap(value: &str) -> Result<Edit> {
        let Some((slot, part)) = value.split_once('=') else {
            return Err(invalid("--swap", value, "expected SLOT=TYPE, e.g. crest=cone".into()));
        };
        let slot = parse_slot("--swap", slot)?;
        let part = PartType::parse(part).ok_or_else(|| {
            invalid(
                "--swap",
                value,
                format!(
                    "unknown part type {part:?}; the types are {}",
                    names(PartType::ALL.map(PartType::name))
                ),
            )
        })?;
        Ok(Edit::Swap(slot, part))
    }
}

impl fmt::Display for Edit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Edit::Remove(slot) => write!(f, "remove {slot}"),
            Edit::Swap(slot, part) => write!(f, "{slot}={part}"),
        }
    }
}

fn parse_slot(setting: &'static str, name: &str) -> Result<Slot> {
    Slot::parse(name).ok_or_else(|| {
        invalid(
            setting,
            name,
            format!(
                "unknown slot {name:?}; the slots are {}",
                names(Slot::ALL.map(Slot::name))
            ),
        )
    })
}

fn names<const N: usize>(names: [&str; N]) -> String {
    names.join(", ")
}

fn invalid(setting: &'static str, value: &str, reason: String) -> DatasetError {
    DatasetError::InvalidSetting {
        setting,
        value: value.to_string(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_parse_and_name_bad_input() {
        assert_eq!(Edit::parse_remove("tail").unwrap(), Edit::Remove(Slot::Tail));
        assert_eq!(
            Edit::parse_swap("crest=ring").unwrap(),
            Edit::Swap(Slot::Crest, PartType::Ring)
        );
        let e = Edit::parse_remove("wing").unwrap_err().to_string();
        assert!(
            e.contains("--remove = wing") && e.contains("crest, front, sides, tail"),
            "{e}"
        );
        let e = Edit::parse_swap("crest=beak").unwrap_err().to_string();
        assert!(
            e.contains("unknown part type \"beak\"") && e.contains("none, cone, ball, plate, ring"),
            "{e}"
        );
        let e = Edit::parse_swap("crest").unwrap_err().to_string();
        assert!(e.contains("SLOT=TYPE"), "{e}");
        let e = Edit::parse_swap("beak=cone").unwrap_err().to_string();
        assert!(e.contains("unknown slot \"beak\""), "{e}");
    }
}
