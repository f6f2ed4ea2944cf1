//! Entropic optimal transport (batched, log-domain, differentiable Sinkhorn) and the
//! DIML structural similarity with its marginals and top-K re-ranking.
//!
//! This crate is part of the workspace layout of `DESIGN.md`; its components arrive with
//! the optimal-transport issue and deliberately expose nothing until they are real.
