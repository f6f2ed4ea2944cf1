//! Explanations of similarity: Grad-CAM similarity attention, SmoothGrad saliency and
//! its comparison, NR-Precision, the AVSL attribution graph, and rendering.
//!
//! This crate is the explanation layer of the workspace (see `ARCHITECTURE.md` at the
//! repository root: it sits on `dml-models`, `dml-losses` and `dml-ot`); its components arrive
//! with the explanation issues and deliberately expose nothing until they are real.
