//! Backbones (ResNet-18/50 in the torchvision layout, BN-Inception, a small CNN for
//! tests) that return every stage's feature map, embedding heads and weight import.
//!
//! This crate is part of the workspace layout of `DESIGN.md`; its components arrive with
//! the backbone issue and deliberately expose nothing until they are real.
