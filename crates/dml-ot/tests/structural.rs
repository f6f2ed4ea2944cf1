//! The structural similarity: gradients against central finite differences, the pairwise training
//! helper against the per-pair forward pass, grid pooling and the decomposition.

mod common;

use burn::tensor::{Device, Tensor, TensorData};
use common::{Rng, host, tensor};
use dml_ot::{
    GridPoolConfig, GridReduction, Marginals, PlanGradient, SinkhornConfig, SinkhornEngine, Structural,
    StructuralConfig, StructuralRerankerConfig, to_locations,
};

/// Features shaped like the reference generator's: a shared base, noise and a positive offset, so that
/// every cross-correlation is clearly positive (no ReLU kink near the evaluation point).
fn features(rng: &mut Rng, items: usize, locations: usize, dim: usize) -> Vec<f64> {
    (0..items * locations * dim).map(|_| rng.normal() + 1.0).collect()
}

fn structural(marginals: Marginals, sinkhorn: SinkhornConfig) -> Structural {
    StructuralConfig { marginals, sinkhorn }.init().unwrap()
}

/// `s_struct` of one pair on a plain (non-autodiff) device.
fn s_struct(module: &Structural, source: &[f64], target: &[f64], [n, m, d]: [usize; 3]) -> f64 {
    let device = Device::flex();
    let out = module.forward(tensor(source, [1, n, d], &device), tensor(target, [1, m, d], &device));
    host(out.similarity)[0]
}

/// Autodiff gradient of `s_struct` with respect to both feature sets against central differences.
fn check_gradient(module: &Structural, what: &str, tolerance: f64) {
    let mut rng = Rng::new(21);
    let (n, m, d) = (4, 6, 3);
    let source = features(&mut rng, 1, n, d);
    let target = features(&mut rng, 1, m, d);
    let device = Device::flex().autodiff();
    let src = tensor(&source, [1, n, d], &device).require_grad();
    let tgt = tensor(&target, [1, m, d], &device).require_grad();
    let out = module.forward(src.clone(), tgt.clone());
    let grads = out.similarity.sum().backward();
    let analytic = [host(src.grad(&grads).unwrap()), host(tgt.grad(&grads).unwrap())];
    let h = 1e-6;
    for (side, base) in [source.clone(), target.clone()].into_iter().enumerate() {
        for k in 0..base.len() {
            let eval = |delta: f64| {
                let mut x = base.clone();
                x[k] += delta;
                if side == 0 {
                    s_struct(module, &x, &target, [n, m, d])
                } else {
                    s_struct(module, &source, &x, [n, m, d])
                }
            };
            let numeric = (eval(h) - eval(-h)) / (2.0 * h);
            let got = analytic[side][k];
            assert!(
                (got - numeric).abs() <= tolerance * (1.0 + numeric.abs()),
                "{what}: d s / d {}[{k}]: autodiff {got}, central difference {numeric}",
                ["source", "target"][side]
            );
        }
    }
}

#[test]
fn unrolled_gradient_matches_finite_differences() {
    // A fixed number of iterations (tolerance 0) makes s_struct a smooth function whose exact
    // derivative is what unrolling computes; eps 0.1 keeps the plan far from a vertex.
    for (engine, absorb, marginals) in [
        (SinkhornEngine::Host, 10, Marginals::CrossCorrelation),
        (SinkhornEngine::Host, 10, Marginals::Uniform),
        (SinkhornEngine::Tensor, 10, Marginals::CrossCorrelation),
        (SinkhornEngine::Tensor, 1, Marginals::CrossCorrelation),
        (SinkhornEngine::Tensor, 10, Marginals::Uniform),
    ] {
        let sinkhorn = SinkhornConfig {
            eps: 0.1,
            max_iters: 40,
            tolerance: 0.0,
            absorb_every: absorb,
            engine: engine.clone(),
            gradient: PlanGradient::Unrolled,
            ..SinkhornConfig::default()
        };
        // Central differences in f64 with h = 1e-6 are accurate to about 1e-9 here.
        check_gradient(
            &structural(marginals.clone(), sinkhorn),
            &format!("unrolled/{engine:?}/{absorb}/{marginals:?}"),
            1e-6,
        );
    }
}

#[test]
fn implicit_gradient_matches_finite_differences_of_the_converged_plan() {
    let sinkhorn = SinkhornConfig {
        eps: 0.1,
        max_iters: 100_000,
        tolerance: 1e-14,
        gradient: PlanGradient::Implicit,
        ..SinkhornConfig::default()
    };
    // The solver stops at a marginal error of 1e-14, so differences over 2h = 2e-6 carry ~1e-8 of
    // solver noise on top of the truncation error.
    check_gradient(&structural(Marginals::CrossCorrelation, sinkhorn), "implicit", 1e-6);
}

#[test]
fn detached_plan_gradient_is_the_plan_weighted_similarity_gradient() {
    let mut rng = Rng::new(4);
    let (n, m, d) = (4, 4, 5);
    let source = features(&mut rng, 1, n, d);
    let target = features(&mut rng, 1, m, d);
    let device = Device::flex().autodiff();
    let detached = structural(
        Marginals::CrossCorrelation,
        SinkhornConfig {
            tolerance: 1e-12,
            max_iters: 10_000,
            gradient: PlanGradient::Detached,
            ..SinkhornConfig::default()
        },
    );
    let src = tensor(&source, [1, n, d], &device).require_grad();
    let out = detached.forward(src.clone(), tensor(&target, [1, m, d], &device));
    let grad = host(src.grad(&out.similarity.clone().sum().backward()).unwrap());
    // The same gradient by hand: T is a constant, S = cos(z^s_i, z^t_j), so
    // d s / d z^s_i = Σ_j T_ij (ẑ^t_j - S_ij ẑ^s_i) / ‖z^s_i‖.
    let plan = host(out.plan);
    let unit = |x: &[f64]| {
        let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
        (x.iter().map(|v| v / norm).collect::<Vec<_>>(), norm)
    };
    for i in 0..n {
        let (zi, norm_i) = unit(&source[i * d..(i + 1) * d]);
        let mut want = vec![0.0; d];
        for j in 0..m {
            let (zj, _) = unit(&target[j * d..(j + 1) * d]);
            let s: f64 = zi.iter().zip(&zj).map(|(a, b)| a * b).sum();
            for k in 0..d {
                want[k] += plan[i * m + j] * (zj[k] - s * zi[k]) / norm_i;
            }
        }
        for k in 0..d {
            let got = grad[i * d + k];
            assert!(
                (got - want[k]).abs() < 1e-12,
                "d s / d source[{i}][{k}]: {got} vs {}",
                want[k]
            );
        }
    }
}

#[test]
fn pairwise_matrices_match_the_per_pair_forward_pass() {
    let mut rng = Rng::new(9);
    let (items, l, d) = (5, 4, 6);
    let x = features(&mut rng, items, l, d);
    let y = features(&mut rng, 3, l, d);
    let device = Device::flex();
    let module = structural(
        Marginals::CrossCorrelation,
        SinkhornConfig {
            tolerance: 1e-12,
            max_iters: 10_000,
            ..SinkhornConfig::default()
        },
    );
    let pairwise = module.similarity_matrix(tensor(&x, [items, l, d], &device));
    let cross = module.cross_similarity(tensor(&x, [items, l, d], &device), tensor(&y, [3, l, d], &device));
    assert_eq!(pairwise.similarity.dims(), [items, items]);
    assert_eq!(pairwise.convergence.len(), items * (items + 1) / 2);
    assert_eq!(cross.similarity.dims(), [items, 3]);
    let (s, g, dist) = (
        host(pairwise.similarity.clone()),
        host(pairwise.global_similarity.clone()),
        host(pairwise.distance.clone()),
    );
    let (cs, cg) = (host(cross.similarity.clone()), host(cross.global_similarity.clone()));
    let item = |v: &[f64], r: usize| v[r * l * d..(r + 1) * l * d].to_vec();
    for i in 0..items {
        for j in 0..items {
            let out = module.forward(
                tensor(&item(&x, i), [1, l, d], &device),
                tensor(&item(&x, j), [1, l, d], &device),
            );
            let want = host(out.similarity)[0];
            assert!(
                (s[i * items + j] - want).abs() < 1e-9,
                "({i}, {j}): {} vs {want}",
                s[i * items + j]
            );
            assert!(
                (s[i * items + j] - s[j * items + i]).abs() < 1e-12,
                "not symmetric at ({i}, {j})"
            );
            assert!((g[i * items + j] - host(out.global_cosine)[0]).abs() < 1e-12);
            // d_struct uses √(2 - 2S + 1e-6) per location pair under the same plan.
            let (plan, sim) = (host(out.plan), host(out.similarity_matrix));
            let want_d: f64 = plan
                .iter()
                .zip(&sim)
                .map(|(t, s)| t * (2.0 - 2.0 * s + 1e-6).max(0.0).sqrt())
                .sum();
            assert!((dist[i * items + j] - want_d).abs() < 1e-9);
        }
        for j in 0..3 {
            let out = module.forward(
                tensor(&item(&x, i), [1, l, d], &device),
                tensor(&item(&y, j), [1, l, d], &device),
            );
            assert!((cs[i * 3 + j] - host(out.similarity)[0]).abs() < 1e-9);
            assert!((cg[i * 3 + j] - host(out.global_cosine)[0]).abs() < 1e-12);
        }
    }
    let combined = host(pairwise.combined_similarity());
    assert!((combined[1] - 0.5 * (s[1] + g[1])).abs() < 1e-15);
}

#[test]
fn pairwise_helper_is_differentiable_with_a_detached_plan() {
    let mut rng = Rng::new(13);
    let (items, l, d) = (4, 4, 3);
    let x = features(&mut rng, items, l, d);
    let device = Device::flex().autodiff();
    let module = StructuralConfig::diml_training().init().unwrap();
    assert_eq!(*module.sinkhorn().gradient(), PlanGradient::Detached);
    let input = tensor(&x, [items, l, d], &device).require_grad();
    let out = module.similarity_matrix(input.clone());
    // A loss that pulls items 0 and 1 together: its gradient must reach both of them.
    let mask = Tensor::<2>::from_data(
        TensorData::new(
            (0..items * items)
                .map(|k| if k == 1 || k == items { 1.0 } else { 0.0 })
                .collect::<Vec<f64>>(),
            [items, items],
        ),
        (&device, burn::tensor::DType::F64),
    );
    let grads = (out.combined_similarity() * mask).sum().backward();
    let grad = host(input.grad(&grads).unwrap());
    assert!(grad.iter().all(|g| g.is_finite()));
    let norm = |r: usize| grad[r * l * d..(r + 1) * l * d].iter().map(|g| g * g).sum::<f64>();
    assert!(norm(0) > 1e-12 && norm(1) > 1e-12, "{grad:?}");
    assert_eq!(norm(2), 0.0);
    assert_eq!(norm(3), 0.0);
}

#[test]
fn grid_pooling_follows_the_reference_code() {
    let device = Device::flex();
    // A horizontal ramp f(y, x) = x on a 7 × 7 map. Bilinear resizing reproduces linear functions
    // exactly, so with align_corners = true the 16 × 16 map holds X · 6/15 at column X, and the 4 × 4
    // adaptive average of columns 4c .. 4c+3 is (4c + 1.5) · 6/15. With align_corners = false the
    // resized columns would be clamp((X + 0.5) · 7/16 - 0.5, 0, 6) instead.
    let ramp: Vec<f32> = (0..2 * 49).map(|k| (k % 7) as f32).collect();
    let maps = Tensor::<4>::from_data(TensorData::new(ramp, [1, 2, 7, 7]), &device);
    let pooled = GridPoolConfig::default().init().unwrap().forward(maps.clone());
    assert_eq!(pooled.dims(), [1, 2, 4, 4]);
    let values = host(pooled);
    for (k, v) in values.iter().enumerate() {
        let c = k % 4;
        let want = (4.0 * c as f64 + 1.5) * 6.0 / 15.0;
        assert!((v - want).abs() < 1e-5, "cell {k}: {v} vs {want}");
    }
    let unaligned = GridPoolConfig {
        reduction: GridReduction::ResizeThenPool {
            size: 16,
            align_corners: false,
        },
        ..GridPoolConfig::default()
    }
    .init()
    .unwrap()
    .forward(maps.clone());
    let first = host(unaligned)[0];
    let want_first: f64 = (0..4)
        .map(|x| ((x as f64 + 0.5) * 7.0 / 16.0 - 0.5).max(0.0))
        .sum::<f64>()
        / 4.0;
    assert!((first - want_first).abs() < 1e-5, "{first} vs {want_first}");
    // 8 × 8 is divisible by 4: plain adaptive pooling averages 2 × 2 blocks.
    let grid: Vec<f32> = (0..64).map(|k| k as f32).collect();
    let maps = Tensor::<4>::from_data(TensorData::new(grid, [1, 1, 8, 8]), &device);
    let pooled = host(GridPoolConfig::default().init().unwrap().forward(maps.clone()));
    assert!((pooled[0] - (0.0 + 1.0 + 8.0 + 9.0) / 4.0).abs() < 1e-6);
    assert!((pooled[15] - (54.0 + 55.0 + 62.0 + 63.0) / 4.0).abs() < 1e-6);
    // Locations come out row-major: location y·G + x holds cell (y, x).
    let locations = to_locations(Tensor::<4>::from_data(
        TensorData::new((0..8).map(|k| k as f32).collect::<Vec<_>>(), [1, 2, 2, 2]),
        &device,
    ));
    assert_eq!(locations.dims(), [1, 4, 2]);
    assert_eq!(host(locations), vec![0.0, 4.0, 1.0, 5.0, 2.0, 6.0, 3.0, 7.0]);
    assert!(
        GridPoolConfig {
            grid: 0,
            ..GridPoolConfig::default()
        }
        .init()
        .is_err()
    );
}

#[test]
fn decomposition_lists_flows_and_contributions() {
    let mut rng = Rng::new(17);
    let (g, d) = (3, 8);
    let source: Vec<f32> = features(&mut rng, 1, g * g, d).into_iter().map(|v| v as f32).collect();
    let target: Vec<f32> = features(&mut rng, 1, g * g, d).into_iter().map(|v| v as f32).collect();
    let module = structural(
        Marginals::CrossCorrelation,
        SinkhornConfig {
            tolerance: 1e-12,
            max_iters: 10_000,
            ..SinkhornConfig::default()
        },
    );
    let dec = module.decompose(&source, [g, g], &target, [g, g], d, 5).unwrap();
    assert!(dec.convergence.converged);
    let n = g * g;
    assert_eq!(dec.plan.len(), n * n);
    let total: f64 = (0..n)
        .flat_map(|i| (0..n).map(move |j| (i, j)))
        .map(|(i, j)| dec.pair(i, j).contribution)
        .sum();
    assert!((total - dec.structural_similarity).abs() < 1e-12);
    // Each source location's share is its row of those contributions.
    let rows = dec.source_contributions();
    assert_eq!(rows.len(), n);
    for (i, r) in rows.iter().enumerate() {
        let want: f64 = (0..n).map(|j| dec.pair(i, j).contribution).sum();
        assert!((r - want).abs() < 1e-15, "row {i}: {r} vs {want}");
    }
    assert!((rows.iter().sum::<f64>() - dec.structural_similarity).abs() < 1e-12);
    assert!((dec.structural_distance - (1.0 - dec.structural_similarity)).abs() < 1e-9);
    assert_eq!(dec.top.len(), 5);
    assert!(dec.top.windows(2).all(|w| w[0].contribution >= w[1].contribution));
    assert!(dec.bottom.windows(2).all(|w| w[0].contribution <= w[1].contribution));
    let best = dec.top[0];
    assert!((best.flow - (n * n) as f64 * best.plan).abs() < 1e-12);
    assert_eq!(best.source_cell, [best.source / g, best.source % g]);
    let max_contribution = (0..n * n)
        .map(|k| dec.plan[k] * dec.similarity_matrix[k])
        .fold(f64::MIN, f64::max);
    assert_eq!(best.contribution, max_contribution);
    // Uniform marginals: a uniform plan would have flow 1 everywhere, so flows average to 1.
    let uniform = structural(
        Marginals::Uniform,
        SinkhornConfig {
            tolerance: 1e-12,
            max_iters: 10_000,
            ..SinkhornConfig::default()
        },
    )
    .decompose(&source, [g, g], &target, [g, g], d, 2)
    .unwrap();
    let mean_flow: f64 = (0..n * n).map(|k| uniform.pair(k / n, k % n).flow).sum::<f64>() / (n * n) as f64;
    assert!((mean_flow - 1.0).abs() < 1e-9);
    // Plain, serialisable data.
    let json = serde_json::to_string(&dec).unwrap();
    let back: dml_ot::Decomposition = serde_json::from_str(&json).unwrap();
    // serde_json's default float parser may round the last bit, hence the 1e-15.
    assert_eq!((back.top.len(), back.plan.len(), back.source_grid), (5, n * n, [g, g]));
    assert!(
        back.plan
            .iter()
            .zip(&dec.plan)
            .all(|(x, y)| (x - y).abs() <= 1e-15 * y.abs())
    );
    assert_eq!(back.convergence.iterations, dec.convergence.iterations);
    assert!(json.contains("\"flow\"") && json.contains("\"mu_source\""));
    assert!(module.decompose(&source[1..], [g, g], &target, [g, g], d, 5).is_err());
}

#[test]
fn settings_serialise_by_variant_name_and_read_back() {
    // The enums keep the names Burn's `Config` derive gave them, so stored settings still read.
    let config = StructuralRerankerConfig {
        depth: 7,
        structural: StructuralConfig {
            sinkhorn: SinkhornConfig {
                gradient: PlanGradient::Detached,
                engine: SinkhornEngine::Tensor,
                ..SinkhornConfig::default()
            },
            marginals: Marginals::Uniform,
        },
    };
    let json = serde_json::to_value(&config).unwrap();
    assert_eq!(json["structural"]["sinkhorn"]["gradient"], "Detached");
    assert_eq!(json["structural"]["sinkhorn"]["engine"], "Tensor");
    assert_eq!(json["structural"]["marginals"], "Uniform");
    assert_eq!(
        serde_json::from_value::<StructuralRerankerConfig>(json).unwrap(),
        config
    );
    let pool = GridPoolConfig {
        reduction: GridReduction::ResizeThenPool {
            size: 16,
            align_corners: true,
        },
        ..GridPoolConfig::default()
    };
    let json = serde_json::to_value(&pool).unwrap();
    assert_eq!(
        json["reduction"],
        serde_json::json!({"ResizeThenPool": {"size": 16, "align_corners": true}})
    );
    assert_eq!(serde_json::from_value::<GridPoolConfig>(json).unwrap(), pool);
    // Missing keys take the declared defaults; a misspelt key is an error that names it.
    let partial: SinkhornConfig = serde_json::from_str(r#"{"eps": 0.1}"#).unwrap();
    assert_eq!(
        partial,
        SinkhornConfig {
            eps: 0.1,
            ..SinkhornConfig::default()
        }
    );
    let err = serde_json::from_str::<SinkhornConfig>(r#"{"epss": 0.1}"#).unwrap_err();
    assert!(err.to_string().contains("epss"), "{err}");
}
