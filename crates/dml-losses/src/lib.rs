//! Distances, miners, reducers and metric-learning losses at pytorch-metric-learning
//! parity, plus the quadruplet, geodesic, AVSL and DIML structural losses.
//!
//! This crate is part of the workspace layout of `DESIGN.md`; its components arrive with
//! the loss-library issue and deliberately expose nothing until they are real.
