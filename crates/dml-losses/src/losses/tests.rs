//! Unit tests of the catalogue: configuration parsing, edge cases of every loss, the
//! matrix entry point, and the quadruplet loss against a naive loop and finite differences.

use burn::tensor::{DType, Device, Tensor, TensorData};
use rand::{Rng, SeedableRng};

use super::proxy_anchor::ProxyAnchorGram;
use super::*;
use crate::miners::MinerConfig;
use crate::tuples::{Triplets, Tuples};

fn device() -> Device {
    Device::flex().autodiff()
}

/// Reproducible Gaussian-ish values in `f64`.
fn random(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| (0..4).map(|_| rng.random::<f64>() - 0.5).sum::<f64>() * 1.7)
        .collect()
}

fn emb(values: Vec<f64>, n: usize, d: usize) -> Tensor<2> {
    Tensor::from_data(TensorData::new(values, [n, d]), (&device(), DType::F64)).require_grad()
}

fn scalar(t: &Tensor<1>) -> f64 {
    t.clone().into_data().iter::<f64>().next().unwrap()
}

/// Runs `loss` on a batch and checks that the loss and every gradient are finite.
fn finite_run(loss: &MetricLoss, values: Vec<f64>, labels: &[u32], d: usize, miner: Option<&Miner>) -> f64 {
    let x = emb(values, labels.len(), d);
    let out = loss
        .forward(x.clone(), labels, miner, 7)
        .unwrap_or_else(|e| panic!("{}: {e}", loss.config().name()));
    let v = scalar(&out.loss);
    assert!(v.is_finite(), "{}: loss {v} on labels {labels:?}", loss.config().name());
    let grads = out.loss.backward();
    if let Some(g) = x.grad(&grads) {
        let g: Vec<f64> = g.into_data().iter::<f64>().collect();
        assert!(
            g.iter().all(|v| v.is_finite()),
            "{}: non-finite gradient on {labels:?}",
            loss.config().name()
        );
    }
    for name in loss.parameter_names() {
        if let Some(g) = loss.parameter_grad(name, &grads) {
            assert!(
                g.iter::<f64>().all(|v| v.is_finite()),
                "{}: non-finite {name} gradient",
                loss.config().name()
            );
        }
    }
    v
}

fn all_losses(classes: usize, d: usize) -> Vec<MetricLoss> {
    LossConfig::names()
        .iter()
        .map(|n| LossConfig::default_for(n).unwrap().init(classes, d, &device()).unwrap())
        .collect()
}

#[test]
fn toml_selects_losses_and_miners_by_name_with_defaults() {
    #[derive(serde::Deserialize)]
    struct Run {
        loss: LossConfig,
        miner: MinerConfig,
    }
    let run: Run = toml::from_str(
        "[loss]\nname = \"margin\"\nmargin = 0.3\nlearn_beta = true\n\
         [miner]\nname = \"distance_weighted\"\ncutoff = 0.6\n",
    )
    .unwrap();
    let LossConfig::Margin(m) = &run.loss else {
        panic!("{:?}", run.loss)
    };
    assert_eq!((m.margin, m.beta, m.learn_beta, m.nu), (0.3, 1.2, true, 0.0));
    let MinerConfig::DistanceWeighted(w) = &run.miner else {
        panic!()
    };
    assert_eq!((w.cutoff, w.nonzero_loss_cutoff), (0.6, 1.4));

    let pa: LossConfig = toml::from_str("name = \"proxy_anchor\"\nmargin = 0.1\nalpha = 32.0").unwrap();
    assert_eq!(pa, LossConfig::default_for("proxy_anchor").unwrap());
    let with_distance: LossConfig =
        toml::from_str("name = \"contrastive\"\ndistance = { type = \"cosine\" }\nreducer = { type = \"mean\" }")
            .unwrap();
    let built = with_distance.init(0, 0, &device()).unwrap();
    assert!(built.distance().is_similarity());
    assert_eq!(built.reducer(), &Reducer::Mean);

    let unknown_field = toml::from_str::<LossConfig>("name = \"margin\"\nmargn = 0.1")
        .unwrap_err()
        .to_string();
    assert!(unknown_field.contains("margn"), "{unknown_field}");
    let unknown_name = toml::from_str::<LossConfig>("name = \"marginal\"")
        .unwrap_err()
        .to_string();
    assert!(
        unknown_name.contains("proxy_anchor") && unknown_name.contains("quadruplet"),
        "{unknown_name}"
    );
    assert!(toml::from_str::<MinerConfig>("name = \"batch_hard\"\nepsilon = 1.0").is_err());
    let counted: LossConfig = toml::from_str("name = \"triplet_margin\"\ntriplets_per_anchor = 5").unwrap();
    let LossConfig::TripletMargin(t) = &counted else {
        panic!()
    };
    assert_eq!(t.triplets_per_anchor, TripletsPerAnchor::Count(5));
    let all: LossConfig = toml::from_str("name = \"margin\"\ntriplets_per_anchor = \"all\"").unwrap();
    assert_eq!(all, LossConfig::default_for("margin").unwrap());
    assert!(toml::from_str::<LossConfig>("name = \"margin\"\ntriplets_per_anchor = \"some\"").is_err());
    // Random triplets per anchor are drawn from the forward seed: same seed, same loss.
    let loss = counted.init(0, 0, &device()).unwrap();
    let labels = [0, 0, 0, 1, 1, 2, 2];
    let v = random(7 * 3, 8);
    let run = |seed| scalar(&loss.forward(emb(v.clone(), 7, 3), &labels, None, seed).unwrap().loss);
    assert_eq!(run(1), run(1));
    assert!(LossConfig::default_for("nope").is_err());
    for name in LossConfig::names() {
        let cfg = LossConfig::default_for(name).unwrap();
        assert_eq!(&cfg.name(), name);
        // Every default configuration survives a TOML round trip.
        let text = toml::to_string(&cfg).unwrap();
        assert_eq!(toml::from_str::<LossConfig>(&text).unwrap(), cfg, "{text}");
    }
    for name in MinerConfig::names() {
        MinerConfig::default_for(name).unwrap().init().unwrap();
    }
}

#[test]
fn invalid_configurations_are_errors() {
    let dev = device();
    let bad_dw = MinerConfig::DistanceWeighted(crate::DistanceWeightedMinerConfig {
        distance: Some(Distance::cosine()),
        ..Default::default()
    });
    assert!(matches!(bad_dw.init(), Err(LossError::Config(_))));
    let circle_lp: LossConfig = toml::from_str("name = \"fast_ap\"\ndistance = { type = \"cosine\" }").unwrap();
    assert!(circle_lp.init(0, 0, &dev).is_err());
    assert!(
        LossConfig::default_for("proxy_anchor")
            .unwrap()
            .init(0, 8, &dev)
            .is_err()
    );
    let loss = LossConfig::default_for("proxy_anchor")
        .unwrap()
        .init(3, 4, &dev)
        .unwrap();
    let err = loss.forward(emb(random(8, 1), 2, 4), &[0, 5], None, 0).unwrap_err();
    assert!(
        matches!(
            err,
            LossError::Label {
                row: 1,
                label: 5,
                num_classes: 3
            }
        ),
        "{err}"
    );
    assert!(matches!(
        loss.forward(emb(random(8, 1), 2, 4), &[0], None, 0),
        Err(LossError::Shape(_))
    ));
    assert!(matches!(
        loss.forward(emb(random(6, 1), 2, 3), &[0, 1], None, 0),
        Err(LossError::Shape(_))
    ));
    let angular = LossConfig::default_for("angular").unwrap().init(0, 0, &dev).unwrap();
    let m = Tensor::<2>::zeros([2, 2], (&dev, DType::F64));
    assert!(matches!(
        angular.forward_with_matrix(m, false, &[0, 1], None, 0),
        Err(LossError::Unsupported(_))
    ));
}

#[test]
fn every_loss_handles_degenerate_batches_without_nan() {
    let d = 4;
    for loss in all_losses(3, d) {
        // A batch of one, one class only, and no positive pair: PML-like zero or a finite loss.
        finite_run(&loss, random(d, 1), &[1], d, None);
        finite_run(&loss, random(4 * d, 2), &[2, 2, 2, 2], d, None);
        finite_run(&loss, random(3 * d, 3), &[0, 1, 2], d, None);
        // Duplicate embeddings (zero distance within and across classes).
        let mut dup = random(5 * d, 4);
        let (first, rest) = dup.split_at_mut(d);
        rest[..d].copy_from_slice(first);
        rest[d..2 * d].copy_from_slice(first);
        finite_run(&loss, dup, &[0, 0, 1, 1, 2], d, None);
        // An ordinary batch.
        finite_run(&loss, random(9 * d, 5), &[0, 0, 0, 1, 1, 1, 2, 2, 2], d, None);
    }
}

#[test]
fn losses_without_pairs_are_zero_and_connected() {
    let d = 4;
    for name in [
        "contrastive",
        "triplet_margin",
        "margin",
        "quadruplet",
        "lifted_structure",
        "sup_con",
        "n_pairs",
    ] {
        let loss = LossConfig::default_for(name).unwrap().init(3, d, &device()).unwrap();
        let x = emb(random(3 * d, 9), 3, d);
        let out = loss.forward(x.clone(), &[0, 1, 2], None, 0).unwrap();
        assert_eq!(scalar(&out.loss), 0.0, "{name}");
        let g = x
            .grad(&out.loss.backward())
            .expect("the zero loss stays connected to the embeddings");
        assert!(g.into_data().iter::<f64>().all(|v| v == 0.0));
    }
}

#[test]
fn non_finite_embeddings_are_an_error_naming_the_row() {
    for loss in all_losses(3, 4) {
        let mut v = random(12, 3);
        v[9] = f64::NAN;
        match loss.forward(emb(v, 3, 4), &[0, 1, 1], None, 0) {
            Err(LossError::NonFinite { row: 2, .. }) => {}
            other => panic!("{}: {other:?}", loss.config().name()),
        }
        let mut v = random(12, 3);
        v[0] = f64::INFINITY;
        assert!(matches!(
            loss.forward(emb(v, 3, 4), &[0, 1, 1], None, 0),
            Err(LossError::NonFinite { row: 0, .. })
        ));
    }
}

#[test]
fn every_miner_composes_with_every_loss() {
    let d = 6;
    let labels = [0, 0, 0, 1, 1, 1, 2, 2, 2, 3];
    for miner_name in MinerConfig::names() {
        let miner = MinerConfig::default_for(miner_name).unwrap().init().unwrap();
        for loss in all_losses(4, d) {
            finite_run(&loss, random(labels.len() * d, 11), &labels, d, Some(&miner));
        }
    }
}

#[test]
fn matrix_entry_point_matches_the_embedding_entry_point() {
    let d = 5;
    let labels = [0, 0, 1, 1, 1, 2, 2, 3];
    let values = random(labels.len() * d, 21);
    let miner = MinerConfig::default_for("multi_similarity").unwrap().init().unwrap();
    for name in LossConfig::names() {
        let cfg = LossConfig::default_for(name).unwrap();
        if !cfg.is_pair_based() {
            continue;
        }
        let loss = cfg.init(4, d, &device()).unwrap();
        for m in [None, Some(&miner)] {
            // The miner must see the same matrix through both entry points.
            if m.is_some() && *loss.distance() != Distance::cosine() {
                continue;
            }
            let a = scalar(
                &loss
                    .forward(emb(values.clone(), labels.len(), d), &labels, m, 3)
                    .unwrap()
                    .loss,
            );
            let mat = loss.distance().self_matrix(emb(values.clone(), labels.len(), d));
            let sim = loss.distance().is_similarity();
            let b = scalar(&loss.forward_with_matrix(mat, sim, &labels, m, 3).unwrap().loss);
            assert!((a - b).abs() <= 1e-12 * (1.0 + a.abs()), "{name}: {a} vs {b}");
        }
    }
}

/// Euclidean distances of L2-normalised rows, computed naively in `f64`.
fn naive_distances(values: &[f64], n: usize, d: usize) -> Vec<f64> {
    let rows: Vec<Vec<f64>> = (0..n)
        .map(|i| {
            let r = &values[i * d..(i + 1) * d];
            let norm = r.iter().map(|v| v * v).sum::<f64>().sqrt();
            r.iter().map(|v| v / norm).collect()
        })
        .collect();
    let mut out = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            out[i * n + j] = rows[i]
                .iter()
                .zip(&rows[j])
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>()
                .sqrt();
        }
    }
    out
}

#[test]
fn quadruplet_matches_a_naive_loop() {
    let (n, d) = (10, 6);
    let labels = [0, 0, 0, 1, 1, 1, 2, 2, 3, 3];
    let values = random(n * d, 31);
    let cfg = QuadrupletLossConfig {
        margin_triplet: 0.3,
        margin_quadruplet: 0.25,
        ..Default::default()
    };
    let loss = LossConfig::Quadruplet(cfg.clone()).init(0, 0, &device()).unwrap();
    let seed = 5;
    let got = loss.forward(emb(values.clone(), n, d), &labels, None, seed).unwrap();

    let dist = naive_distances(&values, n, d);
    let at = |i: usize, j: usize| dist[i * n + j];
    // Every triplet by explicit loops, then the same fourth samples the loss draws.
    let mut t = Triplets::default();
    for a in 0..n {
        for p in 0..n {
            for k in 0..n {
                if a != p && labels[a] == labels[p] && labels[k] != labels[a] {
                    t.a.push(a);
                    t.p.push(p);
                    t.n.push(k);
                }
            }
        }
    }
    let q = Quadruplets::sample(&t, &labels, seed);
    for i in 0..q.len() {
        assert_ne!(labels[q.k[i]], labels[q.a[i]]);
        assert_ne!(labels[q.k[i]], labels[q.n[i]]);
    }
    let trip: f64 = (0..t.len())
        .map(|i| (at(t.a[i], t.p[i]) - at(t.a[i], t.n[i]) + 0.3).max(0.0))
        .sum::<f64>();
    let quad: f64 = (0..q.len())
        .map(|i| (at(q.a[i], q.p[i]) - at(q.n[i], q.k[i]) + 0.25).max(0.0))
        .sum::<f64>();
    let want = trip / t.len() as f64 + quad / q.len() as f64;
    assert!(
        (scalar(&got.loss) - want).abs() < 1e-12,
        "{} vs {want}",
        scalar(&got.loss)
    );
    assert_eq!(got.tuples, t.len() + q.len());
}

#[test]
fn quadruplet_gradient_matches_finite_differences() {
    let (n, d) = (8, 4);
    let labels = [0, 0, 1, 1, 2, 2, 3, 3];
    let values = random(n * d, 41);
    // Large margins keep every hinge active, so the loss is smooth around the point.
    let cfg = QuadrupletLossConfig {
        margin_triplet: 2.5,
        margin_quadruplet: 2.5,
        ..Default::default()
    };
    let loss = LossConfig::Quadruplet(cfg).init(0, 0, &device()).unwrap();
    let f = |v: Vec<f64>| scalar(&loss.forward(emb(v, n, d), &labels, None, 1).unwrap().loss);
    let x = emb(values.clone(), n, d);
    let out = loss.forward(x.clone(), &labels, None, 1).unwrap();
    let grad: Vec<f64> = x
        .grad(&out.loss.backward())
        .unwrap()
        .into_data()
        .iter::<f64>()
        .collect();
    let h = 1e-6;
    for i in 0..n * d {
        let mut plus = values.clone();
        plus[i] += h;
        let mut minus = values.clone();
        minus[i] -= h;
        let fd = (f(plus) - f(minus)) / (2.0 * h);
        // Central differences in f64 are accurate to about h² + ε/h ≈ 1e-10 here.
        assert!(
            (fd - grad[i]).abs() < 1e-7,
            "element {i}: finite difference {fd}, autodiff {}",
            grad[i]
        );
    }
}

#[test]
fn distance_weighted_miner_is_seeded_and_valid() {
    let (n, d) = (24, 16);
    let labels: Vec<u32> = (0..n as u32).map(|i| i / 4).collect();
    let miner = MinerConfig::default_for("distance_weighted").unwrap().init().unwrap();
    let x = emb(random(n * d, 51), n, d);
    let a = miner.mine(x.clone(), &labels, 9).unwrap();
    let b = miner.mine(x.clone(), &labels, 9).unwrap();
    let c = miner.mine(x.clone(), &labels, 10).unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
    let dist = naive_distances(&random(n * d, 51), n, d);
    let Tuples::Triplets(t) = a else { panic!() };
    // Every anchor draws as many triplets as its class has members.
    assert_eq!(t.len(), n * 4);
    for i in 0..t.len() {
        assert_ne!(t.a[i], t.p[i]);
        assert_eq!(labels[t.a[i]], labels[t.p[i]]);
        assert_ne!(labels[t.a[i]], labels[t.n[i]]);
        assert!(dist[t.a[i] * n + t.n[i]] < 1.4);
    }
}

#[test]
fn learnable_state_is_exposed_as_parameters() {
    let dev = device();
    let expect = [
        ("proxy_anchor", vec!["proxies"]),
        ("proxy_nca", vec!["proxies"]),
        ("normalized_softmax", vec!["W"]),
        ("cos_face", vec!["W"]),
        ("arc_face", vec!["W"]),
        ("soft_triple", vec!["fc"]),
        ("contrastive", vec![]),
    ];
    for (name, params) in expect {
        let loss = LossConfig::default_for(name).unwrap().init(3, 4, &dev).unwrap();
        assert_eq!(loss.parameter_names(), params, "{name}");
        assert_eq!(loss.has_parameters(), !params.is_empty());
        assert_eq!(loss.num_params() > 0, !params.is_empty());
    }
    let margin: LossConfig = toml::from_str("name = \"margin\"\nlearn_beta = true\nper_class_beta = true").unwrap();
    let loss = margin.init(5, 4, &dev).unwrap();
    assert_eq!(loss.parameter("beta").unwrap().shape().to_vec(), vec![5]);
    assert!(
        !LossConfig::default_for("margin")
            .unwrap()
            .init(5, 4, &dev)
            .unwrap()
            .has_parameters()
    );
}

/// Central finite differences of `loss` at `values` against its autodiff gradient (embeddings
/// and every learnable tensor), all in `f64`.
fn check_gradient(loss: &mut MetricLoss, values: &[f64], labels: &[u32], d: usize, miner: Option<&Miner>) {
    let n = labels.len();
    let dev = device();
    let name = loss.config().name();
    let x = emb(values.to_vec(), n, d);
    // Learnable state in f64 too, so that the differences are not limited by f32 rounding.
    for p in loss.parameter_names() {
        let data = loss.parameter(p).unwrap();
        let shape = data.shape().to_vec();
        let v: Vec<f64> = data.iter::<f64>().collect();
        loss.set_parameter(p, TensorData::new(v, shape), &dev).unwrap();
    }
    let out = loss.forward(x.clone(), labels, miner, 3).unwrap();
    let grads = out.loss.backward();
    let gx: Vec<f64> = x.grad(&grads).unwrap().into_data().iter::<f64>().collect();
    let f = |loss: &MetricLoss, v: Vec<f64>| scalar(&loss.forward(emb(v, n, d), labels, miner, 3).unwrap().loss);
    let h = 1e-6;
    for i in 0..n * d {
        let (mut plus, mut minus) = (values.to_vec(), values.to_vec());
        plus[i] += h;
        minus[i] -= h;
        let fd = (f(loss, plus) - f(loss, minus)) / (2.0 * h);
        assert!(
            (fd - gx[i]).abs() < 1e-6 * (1.0 + fd.abs()),
            "{name}: d/dx[{i}] fd {fd} vs {}",
            gx[i]
        );
    }
    for p in loss.parameter_names() {
        let g: Vec<f64> = loss.parameter_grad(p, &grads).unwrap().iter::<f64>().collect();
        let data = loss.parameter(p).unwrap();
        let shape = data.shape().to_vec();
        let base: Vec<f64> = data.iter::<f64>().collect();
        for i in 0..base.len() {
            let mut shifted = loss.clone();
            let (mut plus, mut minus) = (base.clone(), base.clone());
            plus[i] += h;
            minus[i] -= h;
            shifted
                .set_parameter(p, TensorData::new(plus, shape.clone()), &dev)
                .unwrap();
            let fp = f(&shifted, values.to_vec());
            shifted
                .set_parameter(p, TensorData::new(minus, shape.clone()), &dev)
                .unwrap();
            let fm = f(&shifted, values.to_vec());
            let fd = (fp - fm) / (2.0 * h);
            assert!(
                (fd - g[i]).abs() < 1e-6 * (1.0 + fd.abs()),
                "{name}: d/d{p}[{i}] fd {fd} vs {}",
                g[i]
            );
        }
    }
}

#[test]
fn host_evaluated_losses_match_finite_differences_for_every_distance() {
    let (d, labels) = (5, [0u32, 0, 0, 1, 1, 2, 2, 2]);
    let values = random(labels.len() * d, 61);
    let distances = [
        "{ type = \"lp\" }",
        "{ type = \"lp\", power = 2.0 }",
        "{ type = \"lp\", power = 1.5, normalize_embeddings = false }",
        "{ type = \"lp\", p = 1.0 }",
        "{ type = \"cosine\" }",
        "{ type = \"dot_product\", normalize_embeddings = false }",
        "{ type = \"snr\" }",
    ];
    let losses = [
        "name = \"margin\"\nlearn_beta = true\nper_class_beta = true\nnu = 0.1",
        "name = \"margin\"\nlearn_beta = true\nnu = 0.2\nmargin = 0.4",
        "name = \"triplet_margin\"\nmargin = 0.3\nswap = true",
        "name = \"triplet_margin\"\nsmooth_loss = true\nreducer = { type = \"threshold\", low = 0.1 }",
        "name = \"multi_similarity\"",
        "name = \"multi_similarity\"\nreducer = { type = \"sum\" }",
    ];
    for l in losses {
        for dist in distances {
            let cfg: LossConfig = toml::from_str(&format!("{l}\ndistance = {dist}")).unwrap();
            let mut loss = cfg.init(3, d, &device()).unwrap();
            check_gradient(&mut loss, &values, &labels, d, None);
        }
    }
    let miner = MinerConfig::default_for("triplet_margin").unwrap().init().unwrap();
    let mut margin = LossConfig::default_for("margin")
        .unwrap()
        .init(3, d, &device())
        .unwrap();
    check_gradient(&mut margin, &values, &labels, d, Some(&miner));
    for name in [
        "proxy_anchor",
        "proxy_nca",
        "soft_triple",
        "arc_face",
        "cos_face",
        "normalized_softmax",
    ] {
        let mut loss = LossConfig::default_for(name).unwrap().init(3, d, &device()).unwrap();
        check_gradient(&mut loss, &values, &labels, d, None);
        check_gradient(&mut loss, &values, &labels, d, Some(&miner));
    }
    let lp: LossConfig = toml::from_str("name = \"proxy_anchor\"\ndistance = { type = \"lp\" }").unwrap();
    check_gradient(&mut lp.init(3, d, &device()).unwrap(), &values, &labels, d, None);
}

#[test]
fn distance_weighted_dimension_can_be_set_for_bare_matrices() {
    let (n, d) = (16, 32);
    let labels: Vec<u32> = (0..n as u32).map(|i| i / 4).collect();
    let x = emb(random(n * d, 71), n, d);
    let mat = Distance::euclidean().self_matrix(x.clone());
    let margin = LossConfig::default_for("margin")
        .unwrap()
        .init(0, 0, &device())
        .unwrap();
    let cfg = |dim| {
        MinerConfig::DistanceWeighted(crate::DistanceWeightedMinerConfig {
            dim,
            ..Default::default()
        })
    };
    let with_dim = cfg(Some(d)).init().unwrap();
    // With the dimension given, the matrix entry point samples exactly what the embedding
    // entry point does.
    let a = scalar(&margin.forward(x, &labels, Some(&with_dim), 4).unwrap().loss);
    let b = scalar(
        &margin
            .forward_with_matrix(mat, false, &labels, Some(&with_dim), 4)
            .unwrap()
            .loss,
    );
    assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    assert!(cfg(Some(1)).init().is_err());
}

/// Runs one Proxy-Anchor Gram path on `x` `[n, d]` (dtype of the values) and returns the loss,
/// `∂L/∂X` and `∂L/∂P` in `f64`.
fn proxy_anchor_path(
    loss: &MetricLoss,
    path: &str,
    x: Tensor<2>,
    labels: &[u32],
    tuples: Option<&Tuples>,
    normalize: bool,
) -> (f64, Vec<f64>, Vec<f64>) {
    let LossConfig::ProxyAnchor(config) = loss.config() else {
        panic!("not a Proxy-Anchor loss")
    };
    let dtype = x.dtype();
    let proxies = loss.context().proxies(dtype).unwrap();
    let gram = ProxyAnchorGram {
        config,
        reducer: loss.reducer(),
        labels,
        tuples,
        normalize,
        sim: true,
        log_phi: 0.0,
    };
    let out = match path {
        "host f64" => gram.host::<f64>(x.clone(), proxies),
        "host f32" => gram.host::<f32>(x.clone(), proxies),
        _ => gram.device(x.clone(), proxies).unwrap(),
    };
    let value = out.loss.clone().into_data().iter::<f64>().next().unwrap();
    let grads = out.loss.backward();
    let gx = x.grad(&grads).unwrap().into_data().iter::<f64>().collect();
    let gp = loss.parameter_grad("proxies", &grads).unwrap().iter::<f64>().collect();
    (value, gx, gp)
}

#[test]
fn proxy_anchor_host_and_device_paths_agree() {
    // Six proxies, of which 4 and 5 have no sample, class 3 a single one; mined and unmined.
    let (d, labels) = (7, [0u32, 0, 1, 1, 1, 2, 2, 3, 0, 2]);
    let n = labels.len();
    let values = random(n * d, 5);
    let miner_tuples = Tuples::Triplets(Triplets {
        a: vec![0, 2, 5],
        p: vec![1, 3, 6],
        n: vec![2, 7, 9],
    });
    let distances = [
        ("{ type = \"cosine\" }", true),
        ("{ type = \"dot_product\", normalize_embeddings = false }", false),
    ];
    for (distance, normalize) in distances {
        let toml_text = format!("name = \"proxy_anchor\"\ndistance = {distance}");
        let cfg: LossConfig = toml::from_str(&toml_text).unwrap();
        let mut loss = cfg.init(6, d, &device()).unwrap();
        let p = loss.parameter("proxies").unwrap();
        let shape = p.shape().to_vec();
        let pv: Vec<f64> = p.iter::<f64>().map(|v| v * 0.3).collect();
        loss.set_parameter("proxies", TensorData::new(pv, shape), &device())
            .unwrap();
        for tuples in [None, Some(&miner_tuples)] {
            let run = |path: &str, dtype: DType| {
                let x = Tensor::from_data(TensorData::new(values.clone(), [n, d]), (&device(), dtype)).require_grad();
                proxy_anchor_path(&loss, path, x, &labels, tuples, normalize)
            };
            let (v0, gx0, gp0) = run("device", DType::F64);
            assert!(v0.is_finite() && v0 > 0.0, "{distance}: loss {v0}");
            for (path, dtype, tol) in [("host f64", DType::F64, 1e-12), ("host f32", DType::F32, 2e-4)] {
                let (v, gx, gp) = run(path, dtype);
                let scale = |g: &[f64]| g.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                assert!(
                    (v - v0).abs() <= tol * v0.abs().max(1.0),
                    "{distance} {path}: loss {v} vs {v0}"
                );
                for (what, got, want) in [("x", &gx, &gx0), ("proxies", &gp, &gp0)] {
                    let s = scale(want).max(1e-9);
                    for (i, (a, b)) in got.iter().zip(want.iter()).enumerate() {
                        assert!(
                            (a - b).abs() <= tol * s,
                            "{distance} {path} ∂L/∂{what}[{i}]: {a} vs {b}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn host_evaluated_losses_agree_in_f32_and_f64() {
    // The f32 path multiplies through the AVX-512 kernel (where the CPU has it), the f64 path
    // through the `gemm` crate: both must give the same loss and gradients up to f32 rounding.
    let (n, d) = (24, 40);
    let labels: Vec<u32> = (0..n as u32).map(|i| i % 5).collect();
    let values = random(n * d, 17);
    let miner = MinerConfig::default_for("multi_similarity").unwrap().init().unwrap();
    let configs = [
        "name = \"margin\"\nlearn_beta = true",
        "name = \"multi_similarity\"",
        "name = \"triplet_margin\"\nmargin = 0.2",
        "name = \"proxy_anchor\"",
        "name = \"multi_similarity\"\ndistance = { type = \"lp\" }",
    ];
    for text in configs {
        let loss = toml::from_str::<LossConfig>(text)
            .unwrap()
            .init(5, d, &device())
            .unwrap();
        let run = |dtype: DType| {
            let x = Tensor::from_data(TensorData::new(values.clone(), [n, d]), (&device(), dtype)).require_grad();
            let out = loss.forward(x.clone(), &labels, Some(&miner), 3).unwrap();
            let value = scalar(&out.loss.clone().cast(DType::F64));
            let grads = out.loss.backward();
            let gx: Vec<f64> = x.grad(&grads).unwrap().into_data().iter::<f64>().collect();
            (value, gx)
        };
        let ((v64, g64), (v32, g32)) = (run(DType::F64), run(DType::F32));
        assert!(
            v64 > 0.0 && (v32 - v64).abs() < 1e-4 * v64.abs().max(1.0),
            "{text}: {v32} vs {v64}"
        );
        let scale = g64.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        assert!(scale > 0.0, "{text}: zero gradient");
        for (i, (a, b)) in g32.iter().zip(&g64).enumerate() {
            assert!((a - b).abs() < 1e-4 * scale, "{text}: ∂L/∂x[{i}] {a} vs {b}");
        }
    }
}

/// The loss value, `∂L/∂X` and the gradient of every learnable tensor (by name) of one pass.
type Run = (f64, Vec<f64>, Vec<(&'static str, Vec<f64>)>);

/// One forward and backward pass of `loss`.
fn value_and_gradients<C: AnyLossConfig + Clone>(
    loss: &LossModule<C>,
    values: &[f64],
    labels: &[u32],
    d: usize,
    miner: Option<&Miner>,
) -> Run {
    let x = emb(values.to_vec(), labels.len(), d);
    let out = loss.forward(x.clone(), labels, miner, 5).unwrap();
    let value = scalar(&out.loss);
    let grads = out.loss.backward();
    let gx = x.grad(&grads).unwrap().into_data().iter::<f64>().collect();
    let gp = loss
        .parameter_names()
        .into_iter()
        .map(|p| (p, loss.parameter_grad(p, &grads).unwrap().iter::<f64>().collect()))
        .collect();
    (value, gx, gp)
}

#[test]
fn a_loss_is_usable_on_its_own() {
    let dev = device();
    let (d, labels) = (5, [0u32, 0, 1, 1, 2, 2, 2, 0]);
    let values = random(labels.len() * d, 81);
    let miner = MinerConfig::default_for("triplet_margin").unwrap().init().unwrap();

    // The margin loss with a learned per-class β, built without the catalogue.
    let margin = MarginLossConfig {
        learn_beta: true,
        per_class_beta: true,
        nu: 0.1,
        ..Default::default()
    };
    let alone: MarginLoss = margin.init(3, d, &dev).unwrap();
    let through = LossConfig::from(margin).init(3, d, &dev).unwrap();
    assert_eq!(alone.parameter_names(), vec!["beta"]);
    for m in [None, Some(&miner)] {
        let a = value_and_gradients(&alone, &values, &labels, d, m);
        assert!(a.0 > 0.0);
        assert_eq!(a, value_and_gradients(&through, &values, &labels, d, m));
    }

    // Proxy-Anchor: the same fixed seed gives the same initial proxies, hence the same loss.
    let alone = ProxyAnchorLoss::new(ProxyAnchorLossConfig::default(), 3, d, &dev).unwrap();
    let through = LossConfig::default_for("proxy_anchor")
        .unwrap()
        .init(3, d, &dev)
        .unwrap();
    assert_eq!(alone.parameter("proxies"), through.parameter("proxies"));
    let a = value_and_gradients(&alone, &values, &labels, d, None);
    assert_eq!(a.2.len(), 1, "the proxies have a gradient");
    assert_eq!(a, value_and_gradients(&through, &values, &labels, d, None));

    // The record of a single loss loads into the catalogue's module and back: the same fields.
    let mut shifted = alone.clone();
    let p = alone.parameter("proxies").unwrap();
    let moved: Vec<f32> = p.iter::<f32>().map(|v| v + 1.0).collect();
    shifted
        .set_parameter("proxies", TensorData::new(moved, p.shape().to_vec()), &dev)
        .unwrap();
    let loaded = through.clone().load_record(shifted.clone().into_record());
    assert_eq!(loaded.parameter("proxies"), shifted.parameter("proxies"));

    // A loss without state, on a precomputed matrix.
    let alone = ContrastiveLossConfig::default().init(0, 0, &dev).unwrap();
    let through = LossConfig::default_for("contrastive")
        .unwrap()
        .init(0, 0, &dev)
        .unwrap();
    let mat = || Distance::euclidean().self_matrix(emb(values.clone(), labels.len(), d));
    let a = scalar(&alone.forward_with_matrix(mat(), false, &labels, None, 0).unwrap().loss);
    let b = scalar(
        &through
            .forward_with_matrix(mat(), false, &labels, None, 0)
            .unwrap()
            .loss,
    );
    assert_eq!(a, b);
}

#[test]
fn the_registry_names_are_exactly_the_names_toml_accepts() {
    let names = LossConfig::names();
    let unique: std::collections::BTreeSet<_> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    for name in names {
        // Every name round-trips through TOML into a configuration of that name.
        let cfg: LossConfig = toml::from_str(&format!("name = \"{name}\"")).unwrap();
        assert_eq!(cfg.name(), *name);
        assert_eq!(LossConfig::default_for(name).unwrap(), cfg);
        let text = toml::to_string(&cfg).unwrap();
        assert!(text.starts_with(&format!("name = \"{name}\"")), "{text}");
    }
    // The alias reads as its loss, through TOML and `default_for` alike.
    let alias = "signal_to_noise_ratio_contrastive";
    let snr: LossConfig = toml::from_str(&format!("name = \"{alias}\"")).unwrap();
    assert_eq!(snr.name(), "snr_contrastive");
    assert_eq!(LossConfig::default_for(alias).unwrap(), snr);
    // And TOML accepts nothing else: the names its error lists are the registry's plus the alias.
    let err = toml::from_str::<LossConfig>("name = \"nope\"").unwrap_err().to_string();
    let listed: std::collections::BTreeSet<&str> = err[err.find("expected one of").expect(&err)..]
        .split('`')
        .skip(1)
        .step_by(2)
        .collect();
    let mut want: std::collections::BTreeSet<&str> = names.iter().copied().collect();
    want.insert(alias);
    assert_eq!(listed, want, "{err}");
}

/// The four GML losses of PPGML with their catalogue baselines: TOML of the GML loss (without
/// its factor and ε2) and of the loss it must equal at `ϕ_s = 1`, `ε2 = 0`.
const GML_BASELINES: [(&str, &str); 4] = [
    (
        "name = \"gml_tri\"\nbeta1 = 0.8",
        "name = \"contrastive\"\npos_margin = 0.8\nneg_margin = 0.8\ndistance = { type = \"lp\", power = 2.0 }",
    ),
    (
        "name = \"gml_contrastive\"\nbeta1 = 0.8",
        "name = \"contrastive\"\npos_margin = 0.0\nneg_margin = 0.8\ndistance = { type = \"lp\", power = 2.0 }",
    ),
    (
        "name = \"gml_ms\"",
        "name = \"multi_similarity\"\nalpha = 2.0\nbeta = 50.0\nbase = 1.0",
    ),
    (
        "name = \"gml_pa\"",
        "name = \"proxy_anchor\"\nmargin = 0.1\nalpha = 48.0",
    ),
];

#[test]
fn gml_losses_with_a_unit_factor_and_no_eigenvalue_term_are_their_baselines() {
    let (d, labels) = (5, [0u32, 0, 0, 1, 1, 2, 2, 2, 1]);
    let values = random(labels.len() * d, 91);
    let miner = MinerConfig::default_for("multi_similarity").unwrap().init().unwrap();
    for (gml, base) in GML_BASELINES {
        let gml_text = format!("{gml}\neps2 = 0.0\nfactor = {{ fixed_phi_s = 1.0, fixed_eigenvalues = [3.0, 1.0] }}");
        let gml_loss = toml::from_str::<LossConfig>(&gml_text)
            .unwrap()
            .init(3, d, &device())
            .unwrap();
        let base_loss = toml::from_str::<LossConfig>(base)
            .unwrap()
            .init(3, d, &device())
            .unwrap();
        for m in [None, Some(&miner)] {
            let a = value_and_gradients(&gml_loss, &values, &labels, d, m);
            let b = value_and_gradients(&base_loss, &values, &labels, d, m);
            assert!(a.0 > 0.0, "{gml}: the batch must exercise the loss");
            assert_eq!(a, b, "{gml} vs {base}");
        }
    }
}

#[test]
fn gml_losses_match_finite_differences() {
    let (d, labels) = (5, [0u32, 0, 0, 1, 1, 2, 2, 2]);
    let values = random(labels.len() * d, 61);
    let miner = MinerConfig::default_for("triplet_margin").unwrap().init().unwrap();
    for (gml, _) in GML_BASELINES {
        // A factor away from 1 and a visible eigenvalue term: the factor is a constant of the
        // step (see `losses::gml`), so the gradient is checked with the factor held fixed.
        let text = format!("{gml}\neps2 = 0.01\nfactor = {{ fixed_phi_s = 1.7, fixed_eigenvalues = [2.0, 0.5] }}");
        let cfg: LossConfig = toml::from_str(&text).unwrap();
        let mut loss = cfg.init(3, d, &device()).unwrap();
        check_gradient(&mut loss, &values, &labels, d, None);
        check_gradient(&mut loss, &values, &labels, d, Some(&miner));
        // The eigenvalue term shifts the value by exactly ε2 Σλ.
        let without: LossConfig = toml::from_str(&text.replace("eps2 = 0.01", "eps2 = 0.0")).unwrap();
        let shifted = value_and_gradients(&loss, &values, &labels, d, None);
        let plain = value_and_gradients(&without.init(3, d, &device()).unwrap(), &values, &labels, d, None);
        assert!(
            (plain.0 - shifted.0 - 0.025).abs() < 1e-12,
            "{gml}: {} vs {}",
            plain.0,
            shifted.0
        );
        assert_eq!(plain.1, shifted.1);
    }
}

#[test]
fn gml_losses_compute_a_finite_factor_and_count_degenerate_batches() {
    use crate::geodesic::factor_counts;
    let d = 6;
    for (gml, _) in GML_BASELINES {
        let loss = toml::from_str::<LossConfig>(gml)
            .unwrap()
            .init(4, d, &device())
            .unwrap();
        // An ordinary batch: a computed factor, a finite loss and gradient.
        let labels: Vec<u32> = (0..24).map(|i| i % 4).collect();
        let before = factor_counts();
        finite_run(&loss, random(24 * d, 5), &labels, d, None);
        assert!(factor_counts().batches > before.batches, "{gml}");
        // Degenerate batches: one class (no triplet), two distinct points, a single sample.
        for (values, labels) in [
            (random(6 * d, 6), vec![1u32; 6]),
            (
                [random(d, 7), random(d, 7), random(d, 8), random(d, 8)].concat(),
                vec![0, 0, 1, 1],
            ),
            (random(d, 9), vec![2]),
        ] {
            let before = factor_counts().degenerate();
            finite_run(&loss, values, &labels, d, None);
            assert!(factor_counts().degenerate() > before, "{gml} on {labels:?}");
        }
    }
}
