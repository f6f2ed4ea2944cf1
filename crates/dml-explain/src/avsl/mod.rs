//! AVSL (Zhang et al., "Attributable Visual Similarity Learning", CVPR 2022): the similarity of
//! two images as a graph over multi-level similarity nodes, inferred top-down, with the final
//! distance attributable to every node.
//!
//! The embeddings and CAMs of each level come from [`dml_models::AvslLevel`]; this module holds
//! the graph: certainty of a CAM ([`certainty`]), the edges between adjacent levels and their
//! moving average ([`links`]), the top-k normalised edges `W̃` ([`link_star`]), and nodes,
//! reliability, rectification and attribution ([`graph`]). Where the paper and the authors' code
//! (zbr17/AVSL) differ, the code is the default and the paper an option.

pub mod certainty;
pub mod graph;
pub mod link_star;
pub mod links;
pub mod proxy_anchor;
pub mod scorer;
pub mod training;
