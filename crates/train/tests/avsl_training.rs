//! AVSL in training and evaluation through the configuration alone: Proxy-Anchor (in distance
//! form, Eq. 14) and Margin each train an epoch; the checkpoint holds the embedder, the reliability
//! (moved from its initial 0.5), the edges' moving average and, for Proxy-Anchor, the proxies;
//! Property 1 holds on the trained graph; the exact `d̂` evaluation equals a brute-force ranking
//! and `train eval` reproduces the run's own final evaluation; bad settings are errors naming the
//! key. (Exact resumption is `avsl_resume.rs`, a test binary of its own.)

mod common;

use burn::tensor::{Device, Distribution, Tensor};
use dml_data::Split;
use dml_explain::avsl::certainty::certainty;
use dml_explain::avsl::graph::{LevelInput, infer};
use dml_train::RunRef;
use dml_train::Silent;
use dml_train::checkpoint::AVSL_FILES;
use dml_train::evaluation::{DimlEval, EvalRequest, run_eval};
use dml_train::retrieval::avsl::{self as avsl_eval, Depth};
use dml_train::{RunOptions, train};

/// AVSL on a one-epoch tiny run: small CNN, three levels of 16 dimensions, top-4 edges.
const AVSL: [&str; 7] = [
    "avsl.enabled=true",
    "avsl.dim=16",
    "avsl.topk=4",
    "train.epochs=1",
    "train.samples_per_epoch=120",
    "model.backbone=\"small_cnn\"",
    "miner=none",
];

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}

#[test]
fn proxy_anchor_and_margin_train_checkpoint_and_evaluate_with_d_hat() {
    let runs = tempfile::tempdir().unwrap();
    for loss in ["proxy_anchor", "margin"] {
        let mut sets = AVSL.to_vec();
        let name = format!("loss.name=\"{loss}\"");
        sets.push(&name);
        let config = common::tiny_config(runs.path(), loss, &sets);
        let summary = train(&config, &RunOptions::default(), &Silent).unwrap_or_else(|e| panic!("{loss}: {e}"));
        let last = summary.history.last().unwrap();
        assert!(
            last.train_loss.is_some_and(f64::is_finite) && last.metrics.precision_at_1.is_finite(),
            "{loss}: {last:?}"
        );
        let run = RunRef::new(&summary.run_dir, "latest").load(&Silent).unwrap();
        let dir = &run.checkpoint;
        assert!(dir.join(AVSL_FILES[0]).is_file(), "{loss}: AVSL module");
        assert_eq!(
            dir.join(AVSL_FILES[1]).is_file(),
            loss == "proxy_anchor",
            "{loss}: the proxies are saved for Proxy-Anchor only"
        );
        let module = run.avsl.as_ref().expect("an AVSL run loads its AVSL module");
        assert!(module.memory.is_initialised(), "{loss}: the edges were never updated");
        // The reliability starts at σ(0) = 0.5 for every node; training must have moved α or β.
        let moved: f32 = module
            .reliability
            .coef
            .iter()
            .chain(&module.reliability.bias)
            .map(|p| p.val().abs().max().into_scalar::<f32>())
            .fold(0.0, f32::max);
        assert!(moved > 1e-4, "{loss}: reliability parameters did not move ({moved})");

        // Property 1 on the trained graph, for images the model has never seen.
        let device = Device::flex();
        let images = Tensor::<4>::random([5, 3, 24, 24], Distribution::Normal(0.0, 1.0), &device);
        let outputs = module.embedder.forward(&run.model.backbone.forward_features(images));
        let links = module.memory.stars(4).unwrap();
        let levels: Vec<LevelInput> = outputs
            .iter()
            .map(|o| {
                let eta = certainty(o.cam.clone(), run.config.avsl.certainty);
                LevelInput {
                    query: o.embedding.clone(),
                    reference: o.embedding.clone(),
                    query_certainty: eta.clone(),
                    reference_certainty: eta,
                }
            })
            .collect();
        let graph = infer(&levels, &links, &module.reliability.regressions(), 10.0).unwrap();
        let lambda = graph.attribution(&links);
        let recomposed = graph.recomposed(&lambda);
        let sums = graph.attribution_sum(&lambda);
        let complete = links
            .iter()
            .all(|l| values(l.clone().sum_dim(0)).iter().all(|c| (c - 1.0).abs() < 1e-5));
        for ((d, r), s) in values(graph.distance.clone())
            .into_iter()
            .zip(values(recomposed))
            .zip(values(sums))
        {
            assert!((d - r).abs() <= 1e-5 * d.abs().max(1.0), "{loss}: d̂ {d} vs Σλδ {r}");
            if complete {
                assert!((s - 16.0).abs() < 1e-3, "{loss}: Σλ = {s}, want r = 16");
            } else {
                assert!(s <= 16.0 + 1e-3, "{loss}: Σλ = {s} above r");
            }
        }

        // The exact evaluation equals a brute-force ranking by d̂ (Precision@1), and `train eval`
        // reproduces the run's own last evaluation.
        let manifest = dml_train::data::load_manifest(&run.config.data, &Silent).unwrap();
        let test = dml_train::data::split_dataset(
            &manifest,
            Split::Test,
            dml_train::data::eval_transform(&run.config.data),
        )
        .unwrap()
        .unwrap();
        let split = avsl_eval::embed(&run.model, module, run.config.avsl.certainty, &test, 100, 2, &device).unwrap();
        let scorer = avsl_eval::scorer(module, &run.config.avsl).unwrap();
        let exact = avsl_eval::score(&scorer, &split, None, Depth::Exact).unwrap();
        assert_eq!(
            exact, last.metrics,
            "{loss}: the run's final evaluation is the exact d̂ one"
        );
        let n = split.bank.rows();
        let hits = (0..n)
            .filter(|&q| {
                let best = (0..n)
                    .filter(|&g| g != q)
                    .min_by(|&a, &b| {
                        let (da, db) = (
                            scorer.distance(&split.bank, q, &split.bank, a),
                            scorer.distance(&split.bank, q, &split.bank, b),
                        );
                        da.total_cmp(&db).then(a.cmp(&b))
                    })
                    .unwrap();
                split.embeddings.labels[best] == split.embeddings.labels[q]
            })
            .count();
        let brute = hits as f64 / n as f64;
        assert!(
            (exact.precision_at_1 - brute).abs() < 1e-12,
            "{loss}: P@1 {} vs brute force {brute}",
            exact.precision_at_1
        );
        let eval = |avsl_k| {
            run_eval(
                &EvalRequest {
                    run: dml_train::RunRef::new(summary.run_dir.clone(), "latest"),
                    split: None,
                    dataset: None,
                    export: None,
                    diml: DimlEval::default(),
                    avsl_k,
                    metrics: dml_train::metrics::REPORTED.to_vec(),
                    out: None,
                },
                &Silent,
            )
            .unwrap()
        };
        let outcome = eval(None);
        let reranked = outcome.reranked.as_ref().expect("d̂ metrics");
        assert_eq!(reranked.metrics, exact, "{loss}");
        assert_eq!(reranked.label, "d̂, exact");
        // Re-scoring only the first neighbour cannot change which image ranks first.
        let one = eval(Some(1));
        assert_eq!(
            one.reranked.unwrap().metrics.precision_at_1,
            one.metrics.precision_at_1,
            "{loss}"
        );
        assert_eq!(
            one.metrics, outcome.metrics,
            "{loss}: K = 0 is the concatenated embedding"
        );
        assert!(eval(Some(0)).reranked.is_none());
    }
}

#[test]
fn bad_avsl_settings_name_the_key() {
    let runs = tempfile::tempdir().unwrap();
    for (extra, key) in [
        (vec!["diml.enabled=true"], "avsl.enabled"),
        (vec!["loss.name=\"normalized_softmax\""], "not pair-based"),
        (vec!["avsl.topk=600"], "avsl.topk"),
        (vec!["avsl.momentum=1.5"], "avsl.momentum"),
        (vec!["avsl.pa_negative_margin=1.0"], "avsl.pa_negative_margin"),
        (vec!["avsl.level_weights=[1.0, -1.0]"], "avsl.level_weights"),
    ] {
        let mut sets = vec!["avsl.enabled=true"];
        sets.extend(extra.iter().copied());
        let err = common::resolve(runs.path(), &sets, &[]).unwrap_err().to_string();
        assert!(err.contains(key), "{extra:?}: {err}");
    }
    // A weight count that does not match the levels is found when the levels are known.
    let config = common::tiny_config(
        runs.path(),
        "weights",
        &[
            "avsl.enabled=true",
            "avsl.dim=8",
            "avsl.topk=2",
            "avsl.level_weights=[1.0]",
        ],
    );
    let err = train(&config, &RunOptions::default(), &Silent).unwrap_err().to_string();
    assert!(err.contains("avsl.level_weights"), "{err}");
    // Unknown stages list the backbone's.
    let config = common::tiny_config(
        runs.path(),
        "stages",
        &[
            "avsl.enabled=true",
            "avsl.dim=8",
            "avsl.topk=2",
            "avsl.stages=[\"layer9\", \"stage4\"]",
            "model.backbone=\"small_cnn\"",
        ],
    );
    let err = train(&config, &RunOptions::default(), &Silent).unwrap_err().to_string();
    assert!(err.contains("avsl.stages") && err.contains("stage1"), "{err}");
}

fn explain(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_train"))
        .arg("explain")
        .arg("avsl")
        .args(args)
        .output()
        .unwrap()
}

/// `train explain avsl` through the real binary: the figures decode, the JSON's numbers are the
/// graph's (`d̂ = Σ λ δ`, nodes ordered by attribution, the decomposition's weights are a column
/// of `W̃`), and bad input is an error naming it.
#[test]
fn explain_avsl_writes_figures_and_the_numbers_of_the_graph() {
    let runs = tempfile::tempdir().unwrap();
    let mut sets = AVSL.to_vec();
    sets.push("loss.name=\"proxy_anchor\"");
    let config = common::tiny_config(runs.path(), "pa", &sets);
    let run = train(&config, &RunOptions::default(), &Silent).unwrap().run_dir;
    let dir = common::data_root().join("synth-n300-s32/images");
    let (a, b) = (dir.join("000000.png"), dir.join("000001.png"));
    let out = runs.path().join("explained");
    let s = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let o = explain(&["--run", &s(&run), "--out", &s(&out), "--top", "2", &s(&a), &s(&b)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("avsl.json")).unwrap()).unwrap();
    let num = |v: &serde_json::Value| v.as_f64().unwrap();
    let (d_hat, recomposed) = (num(&report["d_hat"]), num(&report["recomposed"]));
    assert!(
        d_hat > 0.0 && (d_hat - recomposed).abs() < 1e-4 * d_hat.max(1.0),
        "{d_hat} vs {recomposed}"
    );
    let levels = report["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 3);
    for level in levels {
        let nodes = level["top_nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), 2);
        let lambdas: Vec<f64> = nodes.iter().map(|n| num(&n["attribution"])).collect();
        assert!(lambdas[0] >= lambdas[1], "{lambdas:?}");
        let [h, w] = [0, 1].map(|i| level["map_shape"][i].as_u64().unwrap() as usize);
        assert_eq!(nodes[0]["cams"][1].as_array().unwrap().len(), h * w);
        assert!(num(&level["attribution_sum"]) <= 16.0 + 1e-3);
    }
    let weights: f64 = report["decomposition"]["contributors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| num(&c["weight"]))
        .sum();
    assert!(
        weights == 0.0 || (weights - 1.0).abs() < 1e-4,
        "W̃ column sums to {weights}"
    );
    for file in report["files"].as_array().unwrap() {
        let img = image::open(file.as_str().unwrap()).unwrap();
        assert!(img.width() > 50 && img.height() > 50, "{file}");
    }
    assert_eq!(report["files"].as_array().unwrap().len(), 3 * 2 + 2);

    // Bad input names what is wrong.
    let missing = runs.path().join("missing.png");
    let o = explain(&["--run", &s(&run), "--out", &s(&out), &s(&a), &s(&missing)]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("missing.png"));
    let plain = common::tiny_config(runs.path(), "plain", &["train.epochs=1", "train.samples_per_epoch=40"]);
    let plain = train(&plain, &RunOptions::default(), &Silent).unwrap().run_dir;
    let o = explain(&["--run", &s(&plain), "--out", &s(&out), &s(&a), &s(&b)]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success() && err.contains("[avsl]"), "{err}");
}
