//! The matrix product on the shapes and layouts of ResNet-18's Winograd products (112², batch
//! 32), on one thread: how close the kernel comes to a core's peak where the training step
//! spends most of its time.
//!
//! `cargo bench -p dml-kernels --bench sgemm`
//!
//! Per layer, the α² position products of the forward pass (`M_e = U_e · V_e`), of the input
//! gradient (`∂V_e = U_eᵀ · ∂M_e`, `U_eᵀ` row-major) and of the weight gradient
//! (`∂U_e = ∂M_e · V_eᵀ`, `V_eᵀ` a transposed view), each operand a strided view into the
//! `[·, α², ·]` buffers the Winograd route keeps, each product over every tile into a buffer of
//! its own. Then the forward products as the route runs them where it blocks
//! (`winograd::block_units`): all α² products of [`BLOCK`] tiles at a time into one reused
//! buffer, whose result stays in cache (`forward_in_blocks`). One line per layer and product
//! (`dml_testkit::bench`, id `sgemm/resnet18_<C>ch_<side>px_<product>`, seconds for all α²
//! products, the median of 5 after a warm-up, with the multiply-adds per second).

use dml_kernels::sgemm::{View, available, sgemm};
use dml_testkit::bench::timed;
use serde_json::json;

const BATCH: usize = 32;
const REPEATS: usize = 5;

/// ResNet-18's 3 × 3 stride-1 layers at 112²: channels, map side, and the Winograd tile side
/// `m` the route takes there (F(4 × 4) from 1,024 output positions of the batch on).
const LAYERS: [(usize, usize, usize); 4] = [(64, 28, 4), (128, 14, 4), (256, 7, 4), (512, 4, 2)];

fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7919 + seed * 104_729) % 1000) as f32 - 500.0) / 2000.0)
        .collect()
}

fn main() {
    if !available() {
        eprintln!("sgemm bench: this CPU lacks AVX-512F, which the kernel needs");
        return;
    }
    for (channels, side, m) in LAYERS {
        let alpha = m + 2;
        let p = alpha * alpha;
        let tiles = BATCH * side.div_ceil(m) * side.div_ceil(m);
        let (o, c, t) = (channels, channels, tiles);
        // U [O, P, C], its transpose per position [C, P, O], V [C, P, T], ∂M [O, P, T].
        let u = values(o * p * c, 1);
        let ut = values(c * p * o, 2);
        let v = values(c * p * t, 3);
        let dm = values(o * p * t, 4);
        let mut out = vec![0.0f32; p * o.max(c) * t.max(c)];
        let products: [(&str, [usize; 3], View, View); 3] = [
            (
                "forward",
                [o, t, c],
                View {
                    data: &u,
                    rs: p * c,
                    cs: 1,
                },
                View {
                    data: &v,
                    rs: p * t,
                    cs: 1,
                },
            ),
            (
                "input_grad",
                [c, t, o],
                View {
                    data: &ut,
                    rs: p * o,
                    cs: 1,
                },
                View {
                    data: &dm,
                    rs: p * t,
                    cs: 1,
                },
            ),
            (
                "weight_grad",
                [o, c, t],
                View {
                    data: &dm,
                    rs: p * t,
                    cs: 1,
                },
                View {
                    data: &v,
                    rs: 1,
                    cs: p * t,
                },
            ),
        ];
        for (name, [rows, cols, depth], a, b) in products {
            let (a_step, b_step) = if name == "weight_grad" { (t, t) } else { (c.max(o), t) };
            let (median, min) = timed(REPEATS, || {
                for e in 0..p {
                    let a = View {
                        data: &a.data[e * a_step..],
                        ..a
                    };
                    let b = View {
                        data: &b.data[e * b_step..],
                        ..b
                    };
                    sgemm(&mut out[e * rows * cols..], [rows, cols, depth], a, b, false, false);
                }
                std::hint::black_box(&out);
            });
            report(
                &format!("{channels}ch_{side}px_{name}"),
                [rows, cols, depth],
                p,
                (median, min),
            );
        }
        if t > BLOCK {
            let mut block = vec![0.0f32; p * o * BLOCK];
            let timing = timed(REPEATS, || {
                for first in (0..t).step_by(BLOCK) {
                    let n = BLOCK.min(t - first);
                    for e in 0..p {
                        let a = View {
                            data: &u[e * c..],
                            rs: p * c,
                            cs: 1,
                        };
                        let b = View {
                            data: &v[e * t + first..],
                            rs: p * t,
                            cs: 1,
                        };
                        sgemm(&mut block[e * o * n..], [o, n, c], a, b, false, false);
                    }
                    std::hint::black_box(&block);
                }
            });
            report(
                &format!("{channels}ch_{side}px_forward_in_blocks"),
                [o, t, c],
                p,
                timing,
            );
        }
    }
}

/// Tiles per block of the blocked forward products: two panels of the kernel.
const BLOCK: usize = 128;

/// One bench line for `positions` products of `[rows, depth] × [depth, cols]` that took
/// `(median, min)` seconds.
fn report(name: &str, [rows, cols, depth]: [usize; 3], positions: usize, (median, min): (f64, f64)) {
    let macs = (positions * rows * cols * depth) as f64;
    dml_testkit::bench::emit(
        &format!("sgemm/resnet18_{name}"),
        median,
        "all position products, one thread",
        json!({
            "shape": [rows, cols, depth],
            "positions": positions,
            "min_seconds": min,
            "gmac_per_second": macs / median / 1e9,
        }),
    );
}
