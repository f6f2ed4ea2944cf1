//! The AVSL graph beyond the authors' cases: Property 1 (`d̂ = Σ λ ⊙ δ`, `Σ λ = r`) on random
//! levels, query and reference sets of different sizes; the closed-form attribution equals
//! autodiff's `∂d̂/∂δ`; the moving average copies its first batch; `W̃`'s columns sum to 1; the
//! paper's certainty; bad input is an error.

use burn::tensor::{Device, Distribution, Tensor, TensorData};
use dml_explain::avsl::certainty::{Certainty, certainty};
use dml_explain::avsl::graph::{LevelInput, Reliability, infer};
use dml_explain::avsl::link_star::link_star;
use dml_explain::avsl::links::LinkMemory;
use dml_explain::avsl::proxy_anchor::{LevelProxies, ProxyAnchorDistance};

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}

fn random<const D: usize>(shape: [usize; D], device: &Device) -> Tensor<D> {
    Tensor::random(shape, Distribution::Normal(0.0, 1.0), device)
}

#[test]
fn attribution_recomposes_the_distance_and_sums_to_r() {
    let device = Device::flex();
    let r = [5, 4, 6];
    let (n, m) = (3, 7);
    let levels: Vec<LevelInput> = r
        .iter()
        .map(|&r| LevelInput {
            query: random([n, r], &device),
            reference: random([m, r], &device),
            query_certainty: random([n, r], &device).abs(),
            reference_certainty: random([m, r], &device).abs(),
        })
        .collect();
    let stars: Vec<Tensor<2>> = r
        .windows(2)
        .map(|w| link_star(random([w[0], w[1]], &device).abs(), 2).unwrap().0)
        .collect();
    for s in &stars {
        for column in values(s.clone().sum_dim(0)) {
            assert!((column - 1.0).abs() < 1e-6, "a column of W~ sums to {column}");
        }
    }
    let reliability: Vec<Reliability> = r[1..]
        .iter()
        .map(|&r| Reliability {
            coef: random([r], &device),
            bias: random([r], &device),
        })
        .collect();
    let graph = infer(&levels, &stars, &reliability, 10.0).unwrap();
    assert_eq!(graph.distance.dims(), [n, m]);
    let lambda = graph.attribution(&stars);
    for s in values(graph.attribution_sum(&lambda)) {
        assert!((s - 6.0).abs() < 1e-4, "Σλ = {s}, want r = 6");
    }
    for (a, b) in values(graph.recomposed(&lambda))
        .iter()
        .zip(values(graph.distance.clone()))
    {
        assert!((a - b).abs() < 1e-5 * b.abs().max(1.0), "Σ λ δ = {a}, d̂ = {b}");
    }
}

#[test]
fn closed_form_attribution_equals_autodiff() {
    // Nodes as leaves: the graph's recursion rebuilt on tracked δ, differentiated by autodiff.
    let device = Device::flex().autodiff();
    let r = [3, 4];
    let (n, m) = (2, 3);
    let levels: Vec<LevelInput> = r
        .iter()
        .map(|&r| LevelInput {
            query: random([n, r], &device),
            reference: random([m, r], &device),
            query_certainty: random([n, r], &device).abs(),
            reference_certainty: random([m, r], &device).abs(),
        })
        .collect();
    let star = link_star(random([3, 4], &device).abs(), 2).unwrap().0;
    let reliability = vec![Reliability {
        coef: random([4], &device),
        bias: random([4], &device),
    }];
    let graph = infer(&levels, std::slice::from_ref(&star), &reliability, 10.0).unwrap();
    let lambda = graph.attribution(std::slice::from_ref(&star));
    let d0 = graph.nodes[0].clone().detach().require_grad();
    let d1 = graph.nodes[1].clone().detach().require_grad();
    let p = graph.reliability[0].clone().detach();
    let hat = p.clone() * d1.clone()
        + p.neg().add_scalar(1.0) * d0.clone().reshape([n * m, 3]).matmul(star).reshape([n, m, 4]);
    let grads = hat.sum().backward();
    for (l, d) in [d0, d1].iter().enumerate() {
        let auto = values(d.grad(&grads).unwrap());
        let closed = values(lambda[l].clone());
        for (a, c) in auto.iter().zip(&closed) {
            assert!((a - c).abs() < 1e-5, "level {l}: autodiff {a} vs closed form {c}");
        }
    }
}

#[test]
fn the_moving_average_copies_its_first_batch_then_blends() {
    let device = Device::flex();
    let mut memory = LinkMemory::new(&[2, 3], 0.5, &device).unwrap();
    assert!(!memory.is_initialised());
    let a = Tensor::<2>::from_data(TensorData::new(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]), &device);
    let b = Tensor::<2>::from_data(TensorData::new(vec![3.0f32; 6], [2, 3]), &device);
    memory.update(std::slice::from_ref(&a)).unwrap();
    assert!(memory.is_initialised());
    assert_eq!(values(memory.values()[0].clone()), values(a));
    memory.update(&[b]).unwrap();
    assert_eq!(values(memory.values()[0].clone()), vec![2.0, 2.5, 3.0, 3.5, 4.0, 4.5]);
    let wrong = Tensor::<2>::zeros([3, 2], &device);
    assert!(memory.update(&[wrong]).unwrap_err().to_string().contains("[3, 2]"));
    assert!(LinkMemory::new(&[4], 0.5, &device).is_err());
}

#[test]
fn certainty_of_focused_maps_exceeds_that_of_flat_ones() {
    let device = Device::flex();
    // One map with a single peak, one constant: the peaked one is certain, the flat one is not.
    let mut v = vec![1.0f32; 2 * 16];
    v[5] = 9.0;
    let cams = Tensor::<4>::from_data(TensorData::new(v, [2, 1, 4, 4]), &device);
    for variant in [Certainty::Code, Certainty::Paper] {
        let eta = values(certainty(cams.clone(), variant).reshape([2]));
        assert!(eta[0] > 0.05 && eta[1].abs() < 1e-7, "{variant:?}: {eta:?}");
    }
    assert!(link_star(Tensor::<2>::zeros([3, 2], &device), 4).is_err());
}

#[test]
fn the_training_objective_trains_reliability_through_d_hat_and_the_embedder_through_the_levels() {
    use dml_explain::avsl::training::{AvslSettings, Criterion, ReliabilityParams, avsl_loss};
    use dml_losses::{LossConfig, MarginLossConfig};
    use dml_models::AvslLevel;

    let device = Device::flex().autodiff();
    device.seed(7);
    let dims = [4usize, 5, 6];
    let channels = [3usize, 6, 8];
    let sizes = [(8, 8), (4, 4), (2, 2)];
    let levels: Vec<AvslLevel> = channels
        .iter()
        .zip(&dims)
        .map(|(&c, &r)| AvslLevel::new(c, r, &device).unwrap())
        .collect();
    let labels = [0u32, 0, 1, 1, 2, 2, 3, 3];
    let maps: Vec<Tensor<4>> = channels
        .iter()
        .zip(&sizes)
        .map(|(&c, &(h, w))| random([8, c, h, w], &device).abs().require_grad())
        .collect();
    let outputs: Vec<_> = levels.iter().zip(&maps).map(|(l, z)| l.forward(z.clone())).collect();
    let params = ReliabilityParams::new(&dims, &device);
    let mut memory = LinkMemory::new(&dims, 0.5, &device).unwrap();
    let loss = LossConfig::Margin(MarginLossConfig::default())
        .init(4, 6, &device)
        .unwrap();
    let mut settings = AvslSettings {
        topk: 2,
        gamma: 10.0,
        certainty: Certainty::Code,
        level_weights: vec![0.0; 3],
    };
    // Only L(d̂): the reliability gets a gradient, the levels' inputs none.
    let criterion = Criterion::Pairs {
        loss: &loss,
        miner: None,
        seed: 0,
    };
    let only_hat = avsl_loss(&outputs, &params, &mut memory, &settings, &criterion, &labels).unwrap();
    assert!(memory.is_initialised());
    for p in values(only_hat.graph.reliability[0].clone()) {
        assert!((p - 0.5).abs() < 1e-6, "initial reliability {p}");
    }
    let grads = only_hat.loss.backward();
    let g: f32 = params.bias[1].val().grad(&grads).unwrap().abs().sum().into_scalar();
    assert!(g > 0.0, "d̂ must train the reliability");
    assert!(
        maps.iter().all(|z| z.grad(&grads).is_none()),
        "d̂ must not train the embedder"
    );
    // With level weights the levels' inputs get gradients too.
    settings.level_weights = vec![1.0, 1.0, 1.0];
    let outputs: Vec<_> = levels.iter().zip(&maps).map(|(l, z)| l.forward(z.clone())).collect();
    let full = avsl_loss(&outputs, &params, &mut memory, &settings, &criterion, &labels).unwrap();
    let grads = full.loss.backward();
    assert!(maps.iter().all(|z| z.grad(&grads).is_some()));
    // Property 1 on the step's own graph: d̂ = Σ λ ⊙ δ always; Σλ = r when every column of every
    // W̃ kept a positive edge (a column of only negative correlations passes nothing down).
    let lambda = full.graph.attribution(&full.links);
    let recomposed: f32 = full.graph.recomposed(&lambda).sum().into_scalar();
    let d_hat: f32 = full.graph.distance.clone().sum().into_scalar();
    assert!(
        (recomposed - d_hat).abs() < 1e-4 * d_hat.abs().max(1.0),
        "Σλδ = {recomposed}, d̂ = {d_hat}"
    );
    let sum: f32 = full.graph.attribution_sum(&lambda).sum().into_scalar();
    let complete = full
        .links
        .iter()
        .all(|l| values(l.clone().sum_dim(0)).iter().all(|c| (c - 1.0).abs() < 1e-5));
    if complete {
        assert!((sum / 64.0 - 6.0).abs() < 1e-3, "mean Σλ per pair = {}", sum / 64.0);
    } else {
        assert!(sum / 64.0 < 6.0, "mean Σλ per pair = {}", sum / 64.0);
    }
    settings.level_weights = vec![1.0];
    assert!(avsl_loss(&outputs, &params, &mut memory, &settings, &criterion, &labels).is_err());

    // Proxy-Anchor in distance form: the graph compares the batch with the 4 class proxies; d̂
    // trains the reliability, the level terms the proxies and the embedder.
    let proxies = LevelProxies::new(4, &dims, &device).unwrap();
    let pa = ProxyAnchorDistance::default();
    let criterion = Criterion::ProxyAnchor {
        loss: &pa,
        proxies: &proxies,
    };
    settings.level_weights = vec![1.0, 1.0, 1.0];
    let outputs: Vec<_> = levels.iter().zip(&maps).map(|(l, z)| l.forward(z.clone())).collect();
    let step = avsl_loss(&outputs, &params, &mut memory, &settings, &criterion, &labels).unwrap();
    assert_eq!(step.graph.distance.dims(), [8, 4]);
    let grads = step.loss.backward();
    assert!(proxies.proxies.iter().all(|p| p.val().grad(&grads).is_some()));
    assert!(params.bias[0].val().grad(&grads).is_some());
    assert!(maps.iter().all(|z| z.grad(&grads).is_some()));
    let bad = LevelProxies::new(4, &dims[..2], &device).unwrap();
    let criterion = Criterion::ProxyAnchor {
        loss: &pa,
        proxies: &bad,
    };
    assert!(avsl_loss(&outputs, &params, &mut memory, &settings, &criterion, &labels).is_err());
}

/// The host scorer that retrieval uses computes the same `d̂` as the tensor graph, for every
/// pair of a query bank and a reference bank built from the levels' outputs (CAMs reduced to
/// certainties by the bank itself), and its bank's concatenated embedding has squared distances
/// `Σ_l d^l`.
#[test]
fn the_host_scorer_equals_the_graph() {
    use dml_explain::avsl::scorer::{AvslBank, AvslScorer};
    use dml_models::AvslLevelOutput;
    let device = Device::flex();
    let r = [6, 5, 7];
    let sizes = [(4, 4), (3, 2), (2, 2)];
    let (n, m) = (3, 5);
    let outputs = |b: usize| -> Vec<AvslLevelOutput> {
        r.iter()
            .zip(sizes)
            .map(|(&r, (h, w))| AvslLevelOutput {
                embedding: random([b, r], &device),
                cam: random([b, r, h, w], &device),
            })
            .collect()
    };
    let (qo, go) = (outputs(n), outputs(m));
    let stars: Vec<Tensor<2>> = r
        .windows(2)
        .map(|w| link_star(random([w[0], w[1]], &device), 3).unwrap().0)
        .collect();
    let reliability: Vec<Reliability> = r[1..]
        .iter()
        .map(|&r| Reliability {
            coef: random([r], &device).mul_scalar(20.0),
            bias: random([r], &device).mul_scalar(0.1),
        })
        .collect();
    let levels: Vec<LevelInput> = qo
        .iter()
        .zip(&go)
        .map(|(q, g)| LevelInput {
            query: q.embedding.clone(),
            reference: g.embedding.clone(),
            query_certainty: certainty(q.cam.clone(), Certainty::Code),
            reference_certainty: certainty(g.cam.clone(), Certainty::Code),
        })
        .collect();
    let graph = infer(&levels, &stars, &reliability, 10.0).unwrap();
    let want = values(graph.distance.clone());
    let mut query = AvslBank::new();
    query.push(&qo, Certainty::Code).unwrap();
    let mut reference = AvslBank::new();
    // Two pushes: the bank appends batches.
    let (first, second): (Vec<_>, Vec<_>) = go
        .iter()
        .map(|o| {
            let part = |start: usize, len: usize| AvslLevelOutput {
                embedding: o.embedding.clone().narrow(0, start, len),
                cam: o.cam.clone().narrow(0, start, len),
            };
            (part(0, 2), part(2, m - 2))
        })
        .unzip();
    reference.push(&first, Certainty::Code).unwrap();
    reference.push(&second, Certainty::Code).unwrap();
    assert_eq!((query.rows(), reference.rows()), (n, m));
    let scorer = AvslScorer::new(&stars, &reliability, 10.0).unwrap();
    scorer.check(&query, "query").unwrap();
    scorer.check(&reference, "reference").unwrap();
    let rows: Vec<u32> = (0..m as u32).collect();
    let mut got = vec![0.0f32; m];
    for q in 0..n {
        scorer.distances(&query, q, &reference, &rows, &mut got);
        for g in 0..m {
            let w = want[q * m + g];
            assert!(
                (got[g] - w).abs() <= 1e-5 * (1.0 + w.abs()),
                "pair ({q}, {g}): {} vs {w}",
                got[g]
            );
            assert_eq!(got[g], scorer.distance(&query, q, &reference, g));
        }
    }
    // The concatenation's squared distances are the sum of the level distances.
    let (cq, cg) = (query.concatenated(), reference.concatenated());
    let width: usize = r.iter().sum();
    let sum: Vec<f32> = values(graph.level_distances.iter().cloned().reduce(|a, b| a + b).unwrap());
    for q in 0..n {
        for g in 0..m {
            let d: f32 = (0..width)
                .map(|k| (cq[q * width + k] - cg[g * width + k]).powi(2))
                .sum();
            assert!((d - sum[q * m + g]).abs() < 1e-5, "Σ d^l of ({q}, {g})");
        }
    }
    // A bank of other level sizes is refused by name.
    let mut other = AvslBank::new();
    other.push(&qo[..2], Certainty::Code).unwrap();
    let err = scorer.check(&other, "gallery").unwrap_err().to_string();
    assert!(err.contains("gallery"), "{err}");
}
