//! `train eval` explains itself and loses nothing, through the real binary: every evaluation is a
//! line of `eval/evaluations.jsonl` with the options it ran with (`metrics.json` is the latest),
//! every file is listed, and a re-ranking that cannot change R-Precision and MAP@R (K < R) says so.

mod common;

use std::process::Command;

use dml_train::Silent;
use dml_train::{RunOptions, train};

#[test]
fn evaluations_accumulate_and_a_shallow_rerank_says_why_it_changes_nothing() {
    let runs = tempfile::tempdir().unwrap();
    let config = common::tiny_config(runs.path(), "ev", &["train.epochs=1", "train.samples_per_epoch=40"]);
    let run = train(&config, &RunOptions::default(), &Silent).unwrap().run_dir;
    let eval = |extra: &[&str]| {
        let mut a = vec!["eval", run.to_str().unwrap(), "--checkpoint", "latest"];
        a.extend_from_slice(extra);
        let o = Command::new(env!("CARGO_BIN_EXE_train")).args(&a).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let plain = eval(&[]);
    assert!(
        plain.contains("evaluations.jsonl") && plain.contains("metrics.json"),
        "{plain}"
    );
    assert!(!plain.contains("cannot change them"), "{plain}");
    let reranked = eval(&["--diml-k", "2"]);
    assert!(
        reranked.contains("re-ranking reorders only the top K = 2: it cannot change them"),
        "{reranked}"
    );
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(run.join("eval/evaluations.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["options"]["diml_k"], 0);
    assert_eq!(lines[1]["options"]["diml_k"], 2);
    assert!(lines[1]["reranked"]["metrics"].is_object());
}
