//! NMI and AMI against scikit-learn, and k-means-based clustering scores in `evaluate`.

mod common;

use dml_eval::{
    AccuracyConfig, Distance, Embeddings, EvalError, EvalSets, KMeansConfig, Metric, adjusted_mutual_info, evaluate,
    kmeans, normalized_mutual_info,
};

fn close(got: f64, want: f64, what: &str) {
    assert!((got - want).abs() <= 1e-10, "{what}: got {got}, want {want}");
}

/// A named pair of labelings with scikit-learn's NMI and AMI for it.
type Case = (&'static str, Vec<u32>, Vec<u32>, f64, f64);

/// The labelings of the sklearn cases; formulas are repeated verbatim in the Python that produced the
/// expectations.
fn cases() -> Vec<Case> {
    let f200_t: Vec<u32> = (0..200u32).map(|i| (i * 7 + i * i * 3) % 5).collect();
    let f200_p: Vec<u32> = (0..200u32).map(|i| (i * 11 + (i * i) % 13) % 7).collect();
    let f3000_t: Vec<u32> = (0..3000u32).map(|i| (i * i + 3 * i) % 10).collect();
    let f3000_p: Vec<u32> = (0..3000u32)
        .map(|i| {
            if i % 3 != 0 {
                (i * i + 3 * i) % 10
            } else {
                (i * 17) % 12
            }
        })
        .collect();
    // Values from scikit-learn 1.9.1:
    //   normalized_mutual_info_score(t, p)   (average_method="arithmetic")
    //   adjusted_mutual_info_score(t, p)     (average_method="arithmetic")
    vec![
        (
            "small",
            vec![0, 0, 0, 1, 1, 1],
            vec![0, 0, 1, 1, 2, 2],
            0.5158037429793889,
            0.2987924581708901,
        ),
        (
            "formula200",
            f200_t,
            f200_p,
            0.005358807909215125,
            -0.015645444453274374,
        ),
        ("formula3000", f3000_t, f3000_p, 0.4622075251432013, 0.4615322752918668),
        ("one_vs_many", vec![4; 10], (0..10).collect(), 0.0, 0.0),
        (
            "permuted",
            vec![0, 0, 1, 1, 2, 2, 2],
            vec![5, 5, 9, 9, 1, 1, 1],
            1.0,
            1.0,
        ),
        ("single_single", vec![3, 3, 3], vec![7, 7, 7], 1.0, 1.0),
        ("singletons", (0..12).collect(), (0..12).collect(), 1.0, 1.0),
        (
            "anti",
            vec![0, 1, 0, 1, 0, 1, 0, 1],
            vec![0, 0, 1, 1, 0, 0, 1, 1],
            0.0,
            -0.12974472642510582,
        ),
    ]
}

#[test]
fn nmi_and_ami_match_scikit_learn() {
    for (name, t, p, nmi, ami) in cases() {
        close(normalized_mutual_info(&t, &p).unwrap(), nmi, &format!("{name} NMI"));
        close(adjusted_mutual_info(&t, &p).unwrap(), ami, &format!("{name} AMI"));
        // Both scores are symmetric in their arguments.
        close(
            normalized_mutual_info(&p, &t).unwrap(),
            nmi,
            &format!("{name} NMI swapped"),
        );
        close(
            adjusted_mutual_info(&p, &t).unwrap(),
            ami,
            &format!("{name} AMI swapped"),
        );
    }
}

#[test]
fn mutual_information_edge_cases() {
    // sklearn returns 1.0 for two empty labelings.
    assert_eq!(normalized_mutual_info(&[], &[]).unwrap(), 1.0);
    assert_eq!(adjusted_mutual_info(&[], &[]).unwrap(), 1.0);
    assert_eq!(
        normalized_mutual_info(&[1, 2], &[1]).unwrap_err(),
        EvalError::LabelingLength {
            true_len: 2,
            pred_len: 1
        }
    );
}

#[test]
fn evaluate_reports_nmi_and_ami_of_a_seeded_kmeans() {
    // Four well separated blobs: k-means recovers them, so NMI = AMI = 1.
    let labels: Vec<u32> = (0..200).map(|i| i % 4).collect();
    let data = common::blob_data(&labels, 8, 0.05, 101);
    let sets = EvalSets::QueryIsReference {
        embeddings: data.emb(),
        labels: &labels,
    };
    let cfg = AccuracyConfig::new(Distance::Euclidean).with_metrics([Metric::Nmi, Metric::Ami]);
    let r = evaluate(&sets, &cfg).unwrap();
    close(r.nmi.unwrap(), 1.0, "NMI");
    close(r.ami.unwrap(), 1.0, "AMI");
    assert!(r.precision_at_1.is_none());

    // Overlapping blobs: the scores equal those of kmeans() on the same rows with the same seed.
    let data = common::blob_data(&labels, 8, 1.5, 102);
    let sets = EvalSets::QueryIsReference {
        embeddings: data.emb(),
        labels: &labels,
    };
    let mut cfg = cfg.with_metrics([Metric::Nmi, Metric::Ami, Metric::PrecisionAt1]);
    cfg.kmeans = KMeansConfig {
        seed: 5,
        ..KMeansConfig::default()
    };
    let r = evaluate(&sets, &cfg).unwrap();
    let clusters = kmeans(&data.emb(), 4, &cfg.kmeans).unwrap();
    close(
        r.nmi.unwrap(),
        normalized_mutual_info(&labels, &clusters.assignments).unwrap(),
        "NMI",
    );
    close(
        r.ami.unwrap(),
        adjusted_mutual_info(&labels, &clusters.assignments).unwrap(),
        "AMI",
    );
    assert!(r.nmi.unwrap() < 1.0 && r.nmi.unwrap() > 0.0, "{:?}", r.nmi);
    assert!(r.precision_at_1.is_some());
    // The same seed reproduces the scores exactly.
    assert_eq!(evaluate(&sets, &cfg).unwrap().ami, r.ami);
}

#[test]
fn cosine_clustering_uses_normalised_rows() {
    // Two directions at very different norms: Euclidean k-means on the raw rows would split by norm,
    // cosine geometry splits by direction.
    let mut values = Vec::new();
    let mut labels = Vec::new();
    for i in 0..40u32 {
        let scale = if i % 2 == 0 { 1.0 } else { 50.0 };
        let dir = i % 4 < 2;
        let jitter = (i as f32) * 1e-3;
        values.extend(if dir {
            [scale, jitter * scale]
        } else {
            [jitter * scale, scale]
        });
        labels.push(u32::from(dir));
    }
    let e = Embeddings::new(&values, 40, 2).unwrap();
    let sets = EvalSets::QueryIsReference {
        embeddings: e,
        labels: &labels,
    };
    let cfg = AccuracyConfig::new(Distance::Cosine).with_metrics([Metric::Nmi]);
    close(evaluate(&sets, &cfg).unwrap().nmi.unwrap(), 1.0, "cosine NMI");
    let euclidean = evaluate(
        &sets,
        &AccuracyConfig::new(Distance::Euclidean).with_metrics([Metric::Nmi]),
    )
    .unwrap();
    assert!(
        euclidean.nmi.unwrap() < 0.9,
        "raw-row clustering should not recover directions: {:?}",
        euclidean.nmi
    );
}
