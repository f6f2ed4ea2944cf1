//! Host compute kernels for the CPU backends.
//!
//! Burn's flex backend multiplies through the `gemm` crate, whose AVX-512 micro-kernels, as
//! built here, reach about a quarter of a core's peak. [`sgemm`] keeps its tile in registers and
//! reaches about 65 GMAC/s per core on the development machine (2.5× as much); the
//! host-evaluated losses and [`conv`] (the convolutions of the CNN backbones on flex) use it;
//! the wide 3 × 3 convolutions of stride 1 (most of a ResNet's) go through Winograd's
//! F(2 × 2, 3 × 3) or F(4 × 4, 3 × 3), 2.25 or 4 times fewer multiply-adds; [`norm`] is their
//! batch normalisation, [`conv_bn`] the two fused with ReLU (the conv-BN-ReLU block of the
//! backbones) and [`pool`] their max pooling; [`adam`] is the Adam update of a parameter in one
//! pass.
#![warn(missing_docs)]

pub mod adam;
pub mod conv;
pub mod conv_bn;
mod layout;
pub mod norm;
mod parity;
pub mod pool;
pub mod sgemm;
mod shape;
mod shared;
mod winograd;

pub use shared::Buffer;
