//! Explanations of similarity: Grad-CAM similarity attention, SmoothGrad saliency and
//! its comparison, NR-Precision, the AVSL attribution graph, and rendering.
//!
//! This crate is part of the workspace layout of `DESIGN.md`; its components arrive with
//! the explanation issues and deliberately expose nothing until they are real.
