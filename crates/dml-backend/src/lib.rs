//! Burn plumbing shared by the `dml-*` crates, so that the domain crates write only their
//! forward and backward maths.
//!
//! * [`device`]: which devices compute on this machine's CPU ([`is_cpu_device`]), where the host
//!   kernels of `dml-kernels` replace the backend's own operations.
//! * [`host`]: tensors read to and written from host memory (`f32` read in place on flex,
//!   typed fast paths instead of Burn's per-element conversion).
//! * [`alloc`]: the allocator setting that keeps a training step's freed buffers for the next
//!   step ([`retain_freed_memory`]).
//! * [`op`]: one generic way to register a differentiable operation whose forward and backward
//!   passes are written by hand ([`HostOp`], [`apply`]): the Burn backend extension, the
//!   per-backend routing and the autodiff node live here once.
//!
//! Nothing here knows about metric learning; the crate depends on Burn alone.
#![warn(missing_docs)]

pub mod alloc;
pub mod device;
pub mod host;
pub mod op;

pub use alloc::retain_freed_memory;
pub use device::is_cpu_device;
pub use host::{f32s_in_ne_bytes, float_tensor, read_f64s};
pub use op::{HostOp, OpInput, OpTensor, apply};
