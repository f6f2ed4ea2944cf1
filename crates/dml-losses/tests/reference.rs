//! Runs every `loss` and `mined_loss` reference case (pytorch-metric-learning, float64) in
//! `$DML_REFERENCE_DIR` (default: `tests/fixtures/reference`): the loss value, the gradient
//! with respect to the embeddings and to each learnable parameter, and the mined tuples
//! (compared as sets). Everything is driven by each case's `config` (and `miner`), never by
//! its file name, and every failing case is reported by name.
//!
//! Also every `ppgml_lifting` case (PPGML Eq. 6: `M`, the Kronecker system, `S`, `V`, the
//! tangent condition and the retraction of `V`) and every `ppgml_loss` case (GML-Tri, GML-PA,
//! GML-MS with a given `ϕ_s` and `λ`; the `*_reduction` cases also against the catalogue's
//! baseline loss); each kind must have at least one case.
//!
//! The cases record PML's attributes after construction, so a few values are converted
//! back to constructor arguments here: angles stored in radians (ArcFace and tuplet margins,
//! the angular loss's α) become degrees, and SoftTriple's stored `gamma` is `1 / gamma`.

use burn::tensor::{DType, Device, Tensor, TensorData};
use dml_losses::geodesic::stiefel::{kron_system, lift, retract, tangent_residual};
use dml_losses::{LossConfig, Miner, MinerConfig, Tuples};
use dml_testkit::{Array, Case, Report, Tolerance, cases_or_panic, get};
use nalgebra::{DMatrix, SymmetricEigen};
use serde_json::{Map, Value, json};

fn num(cfg: &Value, key: &str) -> Option<f64> {
    cfg.get(key).and_then(Value::as_f64)
}

/// PML distance JSON → our `Distance` JSON.
fn distance_json(d: &Value) -> Result<Value, String> {
    let ty = get(d, "type")?.as_str().ok_or("distance.type is not a string")?;
    let power = num(d, "power").unwrap_or(1.0);
    let normalize = d.get("normalize_embeddings").and_then(Value::as_bool).unwrap_or(true);
    Ok(match ty {
        "LpDistance" => {
            json!({"type": "lp", "p": num(d, "p").unwrap_or(2.0), "power": power, "normalize_embeddings": normalize})
        }
        "CosineSimilarity" => json!({"type": "cosine", "power": power}),
        "DotProductSimilarity" => json!({"type": "dot_product", "power": power, "normalize_embeddings": normalize}),
        "SNRDistance" => json!({"type": "snr", "power": power, "normalize_embeddings": normalize}),
        other => return Err(format!("unknown distance type {other}")),
    })
}

/// PML reducer JSON → our `Reducer` JSON; `MultipleReducers` must use one kind throughout.
fn reducer_json(r: &Value) -> Result<Value, String> {
    let ty = get(r, "type")?.as_str().ok_or("reducer.type is not a string")?;
    Ok(match ty {
        "MeanReducer" => json!({"type": "mean"}),
        "SumReducer" => json!({"type": "sum"}),
        "DivisorReducer" => json!({"type": "divisor"}),
        "AvgNonZeroReducer" => json!({"type": "avg_non_zero"}),
        "ThresholdReducer" => json!({"type": "threshold", "low": r.get("low"), "high": r.get("high")}),
        "MultipleReducers" => {
            let subs = get(r, "reducers")?.as_object().ok_or("reducers is not an object")?;
            let mut kinds = subs.values().map(reducer_json).collect::<Result<Vec<_>, _>>()?;
            kinds.dedup();
            match kinds.as_slice() {
                [one] => one.clone(),
                [] => reducer_json(get(r, "default_reducer")?)?,
                _ => return Err(format!("mixed sub-loss reducers are not supported: {kinds:?}")),
            }
        }
        other => return Err(format!("unknown reducer type {other}")),
    })
}

/// The case's loss configuration as our TOML-equivalent JSON, deserialised by serde.
fn loss_config(cfg: &Value) -> Result<LossConfig, String> {
    let class = get(cfg, "class")?.as_str().ok_or("class is not a string")?;
    let mut m = Map::new();
    let copy = |m: &mut Map<String, Value>, keys: &[&str]| {
        for k in keys {
            if let Some(v) = cfg.get(*k) {
                m.insert((*k).to_string(), v.clone());
            }
        }
    };
    let name = match class {
        "ContrastiveLoss" => {
            copy(&mut m, &["pos_margin", "neg_margin"]);
            "contrastive"
        }
        "SignalToNoiseRatioContrastiveLoss" => {
            copy(&mut m, &["pos_margin", "neg_margin"]);
            "snr_contrastive"
        }
        "TripletMarginLoss" => {
            copy(&mut m, &["margin", "swap", "smooth_loss", "triplets_per_anchor"]);
            "triplet_margin"
        }
        "NTXentLoss" => {
            copy(&mut m, &["temperature"]);
            "nt_xent"
        }
        "ProxyNCALoss" => {
            copy(&mut m, &["softmax_scale"]);
            "proxy_nca"
        }
        "MarginLoss" => {
            copy(&mut m, &["margin", "nu", "learn_beta", "triplets_per_anchor"]);
            let beta = get(cfg, "beta")?;
            let values: Vec<f64> = match beta {
                Value::Array(v) => v.iter().filter_map(Value::as_f64).collect(),
                v => v.as_f64().into_iter().collect(),
            };
            m.insert("beta".into(), json!(values.first().copied().unwrap_or(1.2)));
            m.insert("per_class_beta".into(), json!(values.len() > 1));
            "margin"
        }
        "NormalizedSoftmaxLoss" => {
            copy(&mut m, &["temperature"]);
            "normalized_softmax"
        }
        "CosFaceLoss" => {
            copy(&mut m, &["margin", "scale"]);
            "cos_face"
        }
        "ArcFaceLoss" => {
            m.insert("margin".into(), json!(num(cfg, "margin").ok_or("margin")?.to_degrees()));
            copy(&mut m, &["scale"]);
            "arc_face"
        }
        "FastAPLoss" => {
            copy(&mut m, &["num_bins"]);
            "fast_ap"
        }
        "MultiSimilarityLoss" => {
            copy(&mut m, &["alpha", "beta", "base"]);
            "multi_similarity"
        }
        "SoftTripleLoss" => {
            copy(&mut m, &["centers_per_class", "la", "margin"]);
            m.insert("gamma".into(), json!(1.0 / num(cfg, "gamma").ok_or("gamma")?));
            "soft_triple"
        }
        "ProxyAnchorLoss" => {
            copy(&mut m, &["margin", "alpha"]);
            "proxy_anchor"
        }
        "NPairsLoss" => "n_pairs",
        "AngularLoss" => {
            m.insert("alpha".into(), json!(num(cfg, "alpha").ok_or("alpha")?.to_degrees()));
            "angular"
        }
        "LiftedStructureLoss" => {
            copy(&mut m, &["pos_margin", "neg_margin"]);
            "lifted_structure"
        }
        "GeneralizedLiftedStructureLoss" => {
            copy(&mut m, &["pos_margin", "neg_margin"]);
            "generalized_lifted_structure"
        }
        "CircleLoss" => {
            copy(&mut m, &["m", "gamma"]);
            "circle"
        }
        "HistogramLoss" => {
            copy(&mut m, &["delta", "n_bins"]);
            "histogram"
        }
        "TupletMarginLoss" => {
            m.insert("margin".into(), json!(num(cfg, "margin").ok_or("margin")?.to_degrees()));
            copy(&mut m, &["scale"]);
            "tuplet_margin"
        }
        "SupConLoss" => {
            copy(&mut m, &["temperature"]);
            "sup_con"
        }
        other => return Err(format!("no loss for PML class {other}")),
    };
    m.insert("name".into(), json!(name));
    // Losses bound to one distance take no `distance` field; the others get the case's.
    let fixed_distance = matches!(
        name,
        "cos_face" | "arc_face" | "soft_triple" | "angular" | "circle" | "tuplet_margin"
    );
    if let (Some(d), false) = (cfg.get("distance"), fixed_distance) {
        m.insert("distance".into(), distance_json(d)?);
    }
    if let Some(r) = cfg.get("reducer") {
        m.insert("reducer".into(), reducer_json(r)?);
    }
    serde_json::from_value(Value::Object(m)).map_err(|e| format!("config does not deserialise: {e}"))
}

/// The case's miner as our configuration.
fn miner_config(cfg: &Value) -> Result<MinerConfig, String> {
    let class = get(cfg, "class")?.as_str().ok_or("miner.class is not a string")?;
    let mut m = Map::new();
    let copy = |m: &mut Map<String, Value>, keys: &[&str]| {
        for k in keys {
            if let Some(v) = cfg.get(*k) {
                m.insert((*k).to_string(), v.clone());
            }
        }
    };
    let name = match class {
        "TripletMarginMiner" => {
            copy(&mut m, &["margin", "type_of_triplets"]);
            "triplet_margin"
        }
        "BatchHardMiner" => "batch_hard",
        "MultiSimilarityMiner" => {
            copy(&mut m, &["epsilon"]);
            "multi_similarity"
        }
        "PairMarginMiner" => {
            copy(&mut m, &["pos_margin", "neg_margin"]);
            "pair_margin"
        }
        "DistanceWeightedMiner" => {
            copy(&mut m, &["cutoff", "nonzero_loss_cutoff"]);
            "distance_weighted"
        }
        other => return Err(format!("no miner for PML class {other}")),
    };
    m.insert("name".into(), json!(name));
    if let Some(d) = cfg.get("distance") {
        m.insert("distance".into(), distance_json(d)?);
    }
    serde_json::from_value(Value::Object(m)).map_err(|e| format!("miner config does not deserialise: {e}"))
}

fn tensor_f64<const D: usize>(a: &Array, device: &Device) -> Tensor<D> {
    Tensor::from_data(TensorData::new(a.data.clone(), a.shape.clone()), (device, DType::F64))
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f64> {
    t.into_data().iter::<f64>().collect()
}

/// Sorted tuples, for comparison as (multi)sets.
fn sorted_tuples(lists: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let len = lists.first().map_or(0, Vec::len);
    let mut v: Vec<Vec<usize>> = (0..len).map(|i| lists.iter().map(|l| l[i]).collect()).collect();
    v.sort();
    v
}

fn compare_mined(got: &Tuples, expected: &Value) -> Result<(), String> {
    let idx = get(expected, "indices")?
        .as_array()
        .ok_or("mined.indices is not an array")?;
    let want: Vec<Vec<usize>> = idx
        .iter()
        .map(|l| {
            l.as_array()
                .map(|v| v.iter().filter_map(Value::as_u64).map(|x| x as usize).collect())
                .unwrap_or_default()
        })
        .collect();
    match (got, want.len()) {
        (Tuples::Triplets(t), 3) => {
            let g = sorted_tuples(&[t.a.clone(), t.p.clone(), t.n.clone()]);
            let w = sorted_tuples(&want);
            if g != w {
                return Err(format!("mined triplets differ: got {} want {}", g.len(), w.len()));
            }
        }
        (Tuples::Pairs(p), 4) => {
            for (what, g, w) in [
                (
                    "positive",
                    sorted_tuples(&[p.a1.clone(), p.p.clone()]),
                    sorted_tuples(&want[0..2]),
                ),
                (
                    "negative",
                    sorted_tuples(&[p.a2.clone(), p.n.clone()]),
                    sorted_tuples(&want[2..4]),
                ),
            ] {
                if g != w {
                    return Err(format!("mined {what} pairs differ: got {} want {}", g.len(), w.len()));
                }
            }
        }
        (g, k) => return Err(format!("mined tuple kind mismatch: got {g:?} for {k} index lists")),
    }
    Ok(())
}

fn run_case(case: &Case) -> Result<(), String> {
    let tol: Tolerance = case.tolerance()?;
    let cfg = case.field("config")?;
    let inputs = case.field("inputs")?;
    let expected = case.field("expected")?;
    let device = Device::flex().autodiff();

    let emb_arr = Array::from_json(get(inputs, "embeddings")?, "embeddings")?;
    let labels: Vec<u32> = get(inputs, "labels")?
        .as_array()
        .ok_or("labels is not an array")?
        .iter()
        .map(|v| v.as_u64().map(|x| x as u32).ok_or("label is not an integer"))
        .collect::<Result<_, _>>()?;
    let (n, dim) = (emb_arr.shape[0], emb_arr.shape[1]);
    let params: Vec<(String, Array)> = match inputs.get("parameters") {
        Some(Value::Object(o)) => o
            .iter()
            .map(|(k, v)| Array::from_json(v, k).map(|a| (k.clone(), a)))
            .collect::<Result<_, _>>()?,
        _ => Vec::new(),
    };

    let config = loss_config(cfg)?;
    // The number of classes: the learnable state's shape when there is one, else the labels.
    let mut num_classes = labels.iter().map(|&l| l as usize + 1).max().unwrap_or(1);
    for (name, a) in &params {
        num_classes = match name.as_str() {
            "proxies" => a.shape[0],
            "W" => a.shape[1],
            "beta" => a.shape[0].max(1),
            "fc" => a.shape[1] / num(cfg, "centers_per_class").unwrap_or(1.0) as usize,
            _ => num_classes,
        };
    }
    let mut loss = config.init(num_classes, dim, &device).map_err(|e| e.to_string())?;
    for (name, a) in &params {
        loss.set_parameter(name, TensorData::new(a.data.clone(), a.shape.clone()), &device)
            .map_err(|e| e.to_string())?;
    }
    let miner: Option<Miner> = match case.json.get("miner") {
        Some(m) if !m.is_null() => Some(miner_config(m)?.init().map_err(|e| e.to_string())?),
        _ => None,
    };

    let emb: Tensor<2> = tensor_f64(&emb_arr, &device).require_grad();
    assert_eq!(emb.dims(), [n, dim]);
    let mut errors = Vec::new();
    if let (Some(m), Some(want)) = (&miner, expected.get("mined")) {
        let got = m.mine(emb.clone(), &labels, 0).map_err(|e| e.to_string())?;
        if let Err(e) = compare_mined(&got, want) {
            errors.push(e);
        }
    }
    let out = loss
        .forward(emb.clone(), &labels, miner.as_ref(), 0)
        .map_err(|e| e.to_string())?;
    let got_loss = values(out.loss.clone());
    let want_loss = Array::from_json(get(expected, "loss")?, "loss")?;
    if let Err(e) = tol.compare("loss", &got_loss, &want_loss.data) {
        errors.push(e);
    }
    let grads = out.loss.backward();
    if let Some(Value::Object(want_grads)) = expected.get("grad") {
        for (name, w) in want_grads {
            let want = Array::from_json(w, name)?;
            let got = if name == "embeddings" {
                emb.grad(&grads).map(values)
            } else {
                loss.parameter_grad(name, &grads).map(|d| d.iter::<f64>().collect())
            };
            // A parameter that the loss did not touch has no gradient entry: it is zero.
            let got = got.unwrap_or_else(|| vec![0.0; want.data.len()]);
            if let Err(e) = tol.compare(&format!("grad[{name}]"), &got, &want.data) {
                errors.push(e);
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

#[test]
fn every_loss_and_mined_loss_case() {
    let cases = cases_or_panic("reference", &["loss", "mined_loss"]);
    let mut report = Report::new();
    for case in &cases {
        let outcome = std::panic::catch_unwind(|| run_case(case)).unwrap_or_else(|p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("panicked: {msg}"))
        });
        report.record(case, outcome);
    }
    report.finish("loss reference");
}

/// Runs `run` on every case of `kind` (at least one must exist) and reports every failure by
/// file name, a panic included.
fn run_all(kind: &str, run: fn(&Case) -> Result<(), String>) {
    let cases = cases_or_panic("reference", &[kind]);
    let mut report = Report::new();
    for case in &cases {
        let outcome = std::panic::catch_unwind(|| run(case)).unwrap_or_else(|p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("panicked: {msg}"))
        });
        report.record(case, outcome);
    }
    report.finish(kind);
}

/// A `[rows, cols]` JSON array as a matrix.
fn matrix(v: &Value, what: &str) -> Result<DMatrix<f64>, String> {
    let a = Array::from_json(v, what)?;
    match a.shape[..] {
        [r, c] => Ok(DMatrix::from_row_slice(r, c, &a.data)),
        _ => Err(format!("{what} is not a matrix: shape {:?}", a.shape)),
    }
}

/// The row-major values of a matrix, as the cases store them.
fn row_major(m: &DMatrix<f64>) -> Vec<f64> {
    m.transpose().as_slice().to_vec()
}

/// The `i`-th matrix of the list `expected.key`.
fn expected_matrix(expected: &Value, key: &str, i: usize) -> Result<DMatrix<f64>, String> {
    let list = get(expected, key)?.as_array().ok_or(format!("{key} is not a list"))?;
    matrix(
        list.get(i).ok_or(format!("{key} has no entry {i}"))?,
        &format!("{key}[{i}]"),
    )
}

fn run_lifting_case(case: &Case) -> Result<(), String> {
    let tol = case.tolerance()?;
    let inputs = case.field("inputs")?;
    let expected = case.field("expected")?;
    let w = matrix(get(inputs, "W")?, "W")?;
    let qs = get(inputs, "Q")?.as_array().ok_or("Q is not a list")?;
    let pd = get(expected, "S_positive_definite")?
        .as_array()
        .ok_or("S_positive_definite is not a list")?;
    let mut errors = Vec::new();
    for (i, q) in qs.iter().enumerate() {
        let q = matrix(q, &format!("Q[{i}]"))?;
        let Some(l) = lift(&w, &q) else {
            errors.push(format!("Q[{i}]: no lifting (singular Kronecker system)"));
            continue;
        };
        let got = [
            ("M", row_major(&l.m)),
            ("kron_system", row_major(&kron_system(&l.m))),
            ("S", row_major(&l.s)),
            ("V", row_major(&l.v)),
            ("retraction_of_V", row_major(&retract(&w, &l.v))),
        ];
        for (key, values) in got {
            let want = expected_matrix(expected, key, i)?;
            if let Err(e) = tol.compare(&format!("{key}[{i}]"), &values, &row_major(&want)) {
                errors.push(e);
            }
        }
        let residual = tangent_residual(&w, &l.v);
        if residual.is_nan() || residual > tol.abs {
            errors.push(format!("Q[{i}]: |WᵀV + VᵀW| = {residual} above {}", tol.abs));
        }
        let symmetric = (&l.s + l.s.transpose()) * 0.5;
        let positive = SymmetricEigen::new(symmetric).eigenvalues.iter().all(|&v| v > 0.0);
        if pd.get(i).and_then(Value::as_bool) != Some(positive) {
            errors.push(format!(
                "Q[{i}]: S positive definite is {positive}, want {:?}",
                pd.get(i)
            ));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// A loss of the catalogue from a name and its fields.
fn catalogue(name: &str, mut fields: Map<String, Value>) -> Result<LossConfig, String> {
    fields.insert("name".into(), json!(name));
    serde_json::from_value(Value::Object(fields)).map_err(|e| format!("{name}: config does not deserialise: {e}"))
}

/// The loss, `∂L/∂embeddings` and `∂L/∂proxies` (when the case has proxies) of one pass.
type Pass = (f64, Vec<f64>, Option<Vec<f64>>);

/// One forward and backward pass of `config` on the case's inputs.
fn pass(
    config: &LossConfig,
    emb: &Array,
    labels: &[u32],
    proxies: Option<&Array>,
    num_classes: usize,
) -> Result<Pass, String> {
    let device = Device::flex().autodiff();
    let mut loss = config
        .init(num_classes, emb.shape[1], &device)
        .map_err(|e| e.to_string())?;
    if let Some(p) = proxies {
        loss.set_parameter("proxies", TensorData::new(p.data.clone(), p.shape.clone()), &device)
            .map_err(|e| e.to_string())?;
    }
    let x: Tensor<2> = tensor_f64(emb, &device).require_grad();
    let out = loss.forward(x.clone(), labels, None, 0).map_err(|e| e.to_string())?;
    let value = values(out.loss.clone())[0];
    let grads = out.loss.backward();
    let gx = x.grad(&grads).map(values).unwrap_or_else(|| vec![0.0; emb.data.len()]);
    let gp = proxies.map(|p| {
        loss.parameter_grad("proxies", &grads)
            .map(|d| d.iter::<f64>().collect())
            .unwrap_or_else(|| vec![0.0; p.data.len()])
    });
    Ok((value, gx, gp))
}

/// Compares a pass with `expected.<loss_key>` and `expected.<grad_key>`.
fn compare_pass(
    tol: &Tolerance,
    expected: &Value,
    (loss_key, grad_key): (&str, &str),
    (value, gx, gp): &Pass,
    errors: &mut Vec<String>,
) -> Result<(), String> {
    let want = Array::from_json(get(expected, loss_key)?, loss_key)?;
    if let Err(e) = tol.compare(loss_key, &[*value], &want.data) {
        errors.push(e);
    }
    let want = Array::from_json(get(expected, &format!("{grad_key}.embeddings"))?, "grad")?;
    if let Err(e) = tol.compare(&format!("{grad_key}[embeddings]"), gx, &want.data) {
        errors.push(e);
    }
    if let Some(gp) = gp {
        let want = Array::from_json(get(expected, &format!("{grad_key}.proxies"))?, "grad")?;
        if let Err(e) = tol.compare(&format!("{grad_key}[proxies]"), gp, &want.data) {
            errors.push(e);
        }
    }
    Ok(())
}

fn run_ppgml_loss_case(case: &Case) -> Result<(), String> {
    let tol = case.tolerance()?;
    let cfg = case.field("config")?;
    let inputs = case.field("inputs")?;
    let expected = case.field("expected")?;
    let emb = Array::from_json(get(inputs, "embeddings")?, "embeddings")?;
    let labels: Vec<u32> = get(inputs, "labels")?
        .as_array()
        .ok_or("labels is not an array")?
        .iter()
        .map(|v| v.as_u64().map(|x| x as u32).ok_or("label is not an integer"))
        .collect::<Result<_, _>>()?;
    let eigenvalues = Array::from_json(get(inputs, "eigenvalues")?, "eigenvalues")?;
    let proxies = inputs
        .get("proxies")
        .map(|p| Array::from_json(p, "proxies"))
        .transpose()?;
    let num_classes = match &proxies {
        Some(p) => p.shape[0],
        None => labels.iter().map(|&l| l as usize + 1).max().unwrap_or(1),
    };
    let hp = get(cfg, "hyperparameters")?;
    let hyper = |key: &str| get(hp, key).and_then(|v| v.as_f64().ok_or(format!("{key} is not a number")));
    let mut fields = Map::new();
    fields.insert("eps2".into(), get(cfg, "eps2")?.clone());
    fields.insert(
        "factor".into(),
        json!({"fixed_phi_s": get(cfg, "phi_s")?, "fixed_eigenvalues": eigenvalues.data}),
    );
    let variant = get(cfg, "variant")?.as_str().ok_or("variant is not a string")?;
    let (name, baseline) = match variant {
        "GML-Tri" => {
            let beta1 = hyper("beta1")?;
            fields.insert("beta1".into(), json!(beta1));
            let base = json!({"pos_margin": beta1, "neg_margin": beta1,
                "distance": {"type": "lp", "power": 2.0, "normalize_embeddings": true}});
            ("gml_tri", ("contrastive", base))
        }
        "GML-PA" => {
            let (margin, alpha) = (hyper("beta2")?, hyper("alpha")?);
            fields.insert("margin".into(), json!(margin));
            fields.insert("alpha".into(), json!(alpha));
            ("gml_pa", ("proxy_anchor", json!({"margin": margin, "alpha": alpha})))
        }
        "GML-MS" => {
            let (alpha, beta, base) = (hyper("alpha_ms")?, hyper("beta_ms")?, hyper("lambda_ms")?);
            fields.insert("alpha".into(), json!(alpha));
            fields.insert("beta".into(), json!(beta));
            fields.insert("base".into(), json!(base));
            (
                "gml_ms",
                ("multi_similarity", json!({"alpha": alpha, "beta": beta, "base": base})),
            )
        }
        other => return Err(format!("unknown GML variant {other}")),
    };
    let mut errors = Vec::new();
    let got = pass(&catalogue(name, fields)?, &emb, &labels, proxies.as_ref(), num_classes)?;
    compare_pass(&tol, expected, ("loss", "grad"), &got, &mut errors)?;
    if expected.get("baseline_loss").is_some() {
        let Value::Object(fields) = baseline.1 else {
            unreachable!("the baseline fields are an object")
        };
        let base = pass(
            &catalogue(baseline.0, fields)?,
            &emb,
            &labels,
            proxies.as_ref(),
            num_classes,
        )?;
        compare_pass(&tol, expected, ("baseline_loss", "baseline_grad"), &base, &mut errors)?;
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

#[test]
fn every_ppgml_lifting_case() {
    run_all("ppgml_lifting", run_lifting_case);
}

#[test]
fn every_ppgml_loss_case() {
    run_all("ppgml_loss", run_ppgml_loss_case);
}
