//! `train explain report` through the real binary on a run trained for one epoch on the tiny
//! synthetic set: the pair and query reports are written, their numbers are the model's (the global
//! similarity is the cosine of the embeddings, the query's rankings agree with the pair views), the
//! pages load in headless Chromium without a console message or a failed resource and with every
//! image decoded, and bad input (missing or undecodable images, a run without a checkpoint, a split
//! that does not exist) is one error naming it, with no report folder left behind.
//!
//! Without `/usr/bin/chromium` (or `$CHROMIUM`) the browser check is skipped, except under `CI`,
//! where it fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use burn::tensor::{Tensor, TensorData};
use dml_data::{Pipeline, decode_rgb};
use dml_train::Silent;
use dml_train::{RunOptions, train};
use rand::SeedableRng;
use serde_json::Value;

fn report(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_train"))
        .args(["explain", "report"])
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The tiny set's images of `split`, with their class ids (from its manifest).
fn split_images(split: &str) -> Vec<(PathBuf, u32)> {
    let dir = common::data_root().join("synth-n300-s32");
    let text = std::fs::read_to_string(dir.join("manifest.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (path, class, sp) = (col("path"), col("class_id"), col("split"));
    lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|c| c[sp] == split)
        .map(|c| (dir.join(c[path]), c[class].parse().unwrap()))
        .collect()
}

/// The embeddings of `images` by the run's model, computed here without the report's code.
fn embeddings(run: &Path, images: &[&Path]) -> Vec<Vec<f32>> {
    let model = dml_train::RunRef::new(run, "best").load(&Silent).unwrap();
    let pipeline = Pipeline::new(dml_train::data::eval_transform(&model.config.data)).unwrap();
    images
        .iter()
        .map(|p| {
            let rgb = decode_rgb(p).unwrap();
            let (h, w) = pipeline.output_size(rgb.width(), rgb.height());
            let values = pipeline.apply(&rgb, &mut rand_chacha::ChaCha8Rng::seed_from_u64(0));
            let x = Tensor::<4>::from_data(TensorData::new(values, [1, 3, h as usize, w as usize]), &model.device);
            model.model.forward(x).into_data().iter::<f32>().collect()
        })
        .collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

#[test]
fn pair_and_query_reports_of_a_trained_run() {
    let runs = tempfile::tempdir().unwrap();
    let config = common::tiny_config(runs.path(), "cnn", &["train.epochs=1", "train.samples_per_epoch=100"]);
    let run = train(&config, &RunOptions::default(), &Silent).unwrap().run_dir;
    let test = split_images("test");
    let (a, b) = (&test[0].0, &test[7].0);

    // The pair view.
    let out = runs.path().join("pair");
    let o = report(&["--run", s(&run), "--samples", "8", "--out", s(&out), s(a), s(b)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = json(&out.join("report.json"));
    let e = embeddings(&run, &[a, b]);
    let expected = cosine(&e[0], &e[1]);
    let got = f(&r["global"]["cosine"]);
    assert!(
        (got - expected).abs() < 1e-5,
        "global cosine {got} vs the embeddings' {expected}"
    );
    assert!((f(&r["global"]["distance"]) - (1.0 - expected)).abs() < 1e-5);
    let diml = &r["diml"];
    let s_struct = f(&diml["structural_similarity"]);
    assert!((f(&diml["rerank_similarity"]) - (expected + s_struct)).abs() < 1e-5);
    for mu in diml["marginals"].as_array().unwrap() {
        let mu: Vec<f64> = mu.as_array().unwrap().iter().map(f).collect();
        assert_eq!(mu.len(), 16, "a 4 x 4 grid");
        assert!((mu.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{mu:?}");
    }
    let flows: Vec<f64> = diml["top_flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|fl| f(&fl["contribution"]))
        .collect();
    assert_eq!(flows.len(), 8);
    assert!(flows.windows(2).all(|w| w[0] >= w[1]), "{flows:?}");
    assert!(
        flows.iter().sum::<f64>() <= s_struct + 1e-9,
        "the top flows are part of s_struct"
    );
    assert_eq!(r["avsl"]["status"], "not_available");
    assert!(r["avsl"]["reason"].as_str().unwrap().contains("avsl"));
    let scores: Vec<f64> = r["attention"]["scores"].as_array().unwrap().iter().map(f).collect();
    assert!(scores.iter().all(|v| v.is_finite()), "{scores:?}");
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.contains("not available"), "the AVSL cell says so");
    assert!(
        page.contains("score at stage4 (") && !page.contains("stage stage"),
        "the stage is named once"
    );
    assert!(
        page.contains(&format!("{expected:.4}")),
        "the page shows the global cosine"
    );
    assert!(!page.contains("http://") && !page.contains("https://") && !page.contains("<script"));
    for name in [
        "image_1.png",
        "image_2.png",
        "diml_marginals.png",
        "diml_flows.png",
        "attention.png",
        "saliency.png",
    ] {
        let img = image::open(out.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(img.width() >= 24 && img.height() >= 24, "{name}");
    }

    // The query view: the query is one of the split's images, so it is not its own hit.
    let qout = runs.path().join("query");
    let (query, query_label) = &test[0];
    let o = report(&[
        "--run",
        s(&run),
        "--query",
        s(query),
        "--top",
        "3",
        "--samples",
        "4",
        "--out",
        s(&qout),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let q = json(&qout.join("report.json"));
    assert_eq!(q["query_label"].as_u64().unwrap() as u32, *query_label);
    assert_eq!(q["gallery_size"].as_u64().unwrap() as usize, test.len() - 1);
    let rankings = q["rankings"].as_array().unwrap();
    assert_eq!(rankings.len(), 3);
    for ranking in rankings {
        let method = ranking["method"].as_str().unwrap();
        if method == "avsl" {
            assert_eq!(ranking["hits"]["status"], "not_available");
            continue;
        }
        let hits = ranking["hits"]["hits"].as_array().unwrap();
        assert_eq!(hits.len(), 3, "{method}");
        let scores: Vec<f64> = hits.iter().map(|h| f(&h["score"])).collect();
        for hit in hits {
            let path = PathBuf::from(hit["path"].as_str().unwrap());
            assert_ne!(path, *query, "{method}: the query retrieved itself");
            let label = hit["label"].as_u64().unwrap() as u32;
            assert_eq!(hit["correct"].as_bool().unwrap(), label == *query_label);
            // Every hit opens its pair view, whose numbers agree with the ranking's score.
            let pair = json(
                &qout
                    .join(hit["pair_page"].as_str().unwrap())
                    .with_file_name("report.json"),
            );
            // The ranking embeds the split in batches, the pair view two images at once: the
            // convolutions sum in another order, so the cosines agree to about 1e-6, not exactly.
            let cos = f(&pair["global"]["cosine"]);
            match method {
                "global" => assert!((f(&hit["score"]) - (1.0 - cos)).abs() < 1e-4, "{hit} vs {cos}"),
                _ => {
                    let rerank = f(&pair["diml"]["rerank_similarity"]);
                    assert!((f(&hit["score"]) - rerank).abs() < 1e-4, "{hit} vs {rerank}");
                }
            }
            for (_, thumb) in hit["thumbnails"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| (t[0].clone(), t[1].clone()))
            {
                assert!(qout.join(thumb.as_str().unwrap()).is_file(), "{thumb}");
            }
        }
        match method {
            "global" => {
                assert!(scores.windows(2).all(|w| w[0] <= w[1]), "{scores:?}");
                // The nearest hit by the independently computed embeddings.
                let nearest = f(&hits[0]["score"]);
                let others: Vec<&Path> = test[1..].iter().map(|(p, _)| p.as_path()).collect();
                let mut all = vec![query.as_path()];
                all.extend(&others);
                let e = embeddings(&run, &all);
                let best = e[1..]
                    .iter()
                    .map(|x| 1.0 - cosine(&e[0], x))
                    .fold(f64::INFINITY, f64::min);
                assert!((nearest - best).abs() < 1e-4, "nearest {nearest} vs {best}");
            }
            _ => assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}"),
        }
    }

    browser_check(&[out.join("report.html"), qout.join("report.html")], runs.path());
}

/// The Chromium binary, or `None` (skip) outside CI.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("CHROMIUM").map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but {} is missing: install chromium (.ci/run does)",
        path.display()
    );
    eprintln!("skipping the browser check: {} is missing", path.display());
    None
}

/// What the checker reports after the page's `load` event: every image's natural size and every
/// resource or script error, written into the DOM so that `--dump-dom` prints it.
const CHECKER_HEAD: &str = "<script>window.__errors=[];window.addEventListener('error',function(e){var \
     t=e.target;window.__errors.push(t&&(t.src||t.href)?('resource '+(t.src||t.href)):('script \
     '+e.message));},true);</script>";
const CHECKER_BODY: &str = "<script>window.addEventListener('load',function(){var r=[];for(var \
     i=0;i<document.images.length;i++){var m=document.images[i];r.push([m.getAttribute('src'),m.naturalWidth,\
     m.naturalHeight]);}document.body.setAttribute('data-check',JSON.stringify({images:r,errors:window.__errors}));\
     });</script>";

/// Opens every page in headless Chromium: no console message, no failed resource, every `<img>`
/// decoded with a non-zero natural size; writes a desktop and a phone screenshot of each.
fn browser_check(pages: &[PathBuf], scratch: &Path) {
    let Some(chromium) = chromium() else { return };
    for page in pages {
        let html = std::fs::read_to_string(page).unwrap();
        assert!(html.contains("<img"), "{}", page.display());
        // The checker runs in a copy beside the page, so relative image paths resolve the same.
        let probe = page.with_file_name("probe.html");
        let instrumented = html.replacen("<head>", &format!("<head>{CHECKER_HEAD}"), 1).replacen(
            "</body>",
            &format!("{CHECKER_BODY}</body>"),
            1,
        );
        std::fs::write(&probe, instrumented).unwrap();
        let url = format!("file://{}", probe.display());
        let o = Command::new(&chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--enable-logging=stderr",
                "--v=0",
                "--virtual-time-budget=10000",
                "--dump-dom",
                &url,
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "chromium failed: {}", stderr(&o));
        let log = stderr(&o);
        let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
        assert!(console.is_empty(), "{}: console messages {console:?}", page.display());
        let dom = String::from_utf8_lossy(&o.stdout).into_owned();
        let start = dom
            .find("data-check=\"")
            .unwrap_or_else(|| panic!("{}: the checker did not run: {dom}", page.display()))
            + "data-check=\"".len();
        let end = start + dom[start..].find('"').unwrap();
        let check: Value =
            serde_json::from_str(&dom[start..end].replace("&quot;", "\"").replace("&amp;", "&")).unwrap();
        assert_eq!(
            check["errors"].as_array().unwrap().len(),
            0,
            "{}: {check}",
            page.display()
        );
        let images = check["images"].as_array().unwrap();
        assert!(!images.is_empty());
        for img in images {
            assert!(
                f(&img[1]) > 0.0 && f(&img[2]) > 0.0,
                "{}: {img} did not load",
                page.display()
            );
        }
        std::fs::remove_file(&probe).unwrap();
        let name = page
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        for (size, label) in [("1280,2400", "desktop"), ("390,844", "phone")] {
            let shot = scratch.join(format!("{name}-{label}.png"));
            let o = Command::new(&chromium)
                .args([
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--hide-scrollbars",
                    &format!("--window-size={size}"),
                    &format!("--screenshot={}", shot.display()),
                    &format!("file://{}", page.display()),
                ])
                .output()
                .unwrap();
            assert!(o.status.success(), "chromium screenshot failed: {}", stderr(&o));
            let img = image::open(&shot).unwrap_or_else(|e| panic!("{}: {e}", shot.display()));
            assert!(img.width() > 300, "{}", shot.display());
            if let Some(dir) = std::env::var_os("REPORT_SCREENSHOTS") {
                std::fs::copy(&shot, Path::new(&dir).join(shot.file_name().unwrap())).unwrap();
            }
        }
    }
}

#[test]
fn bad_input_is_one_error_naming_it_and_leaves_no_report() {
    let runs = tempfile::tempdir().unwrap();
    let config = common::tiny_config(runs.path(), "cnn", &["train.epochs=1", "train.samples_per_epoch=40"]);
    let run = train(&config, &RunOptions::default(), &Silent).unwrap().run_dir;
    let test = split_images("test");
    let good = &test[0].0;
    let out = runs.path().join("out");

    // An image of 16 bits per channel is converted and explained.
    let deep = runs.path().join("deep16.png");
    let rgb16 = image::ImageBuffer::<image::Rgb<u16>, Vec<u16>>::from_fn(40, 40, |x, y| {
        image::Rgb([(x * 1600) as u16, (y * 1600) as u16, 30000])
    });
    rgb16.save(&deep).unwrap();
    let o = report(&["--run", s(&run), "--samples", "2", "--out", s(&out), s(good), s(&deep)]);
    assert!(o.status.success(), "a 16-bit PNG: {}", stderr(&o));
    assert!(out.join("report.html").is_file());
    std::fs::remove_dir_all(&out).unwrap();

    // A CMYK JPEG (Adobe APP14, four components; `tests/fixtures/cmyk.jpg`, 16 x 16 with four flat
    // quadrants) is converted to RGB by the decoder and explained.
    let cmyk = dml_testkit::workspace_root().join("crates/train/tests/fixtures/cmyk.jpg");
    let decoded = decode_rgb(&cmyk).unwrap();
    assert_ne!(
        decoded.get_pixel(2, 2),
        decoded.get_pixel(13, 2),
        "the quadrants differ"
    );
    let o = report(&["--run", s(&run), "--samples", "2", "--out", s(&out), s(good), s(&cmyk)]);
    assert!(o.status.success(), "a CMYK JPEG: {}", stderr(&o));
    assert!(f(&json(&out.join("report.json"))["global"]["cosine"]).is_finite());
    std::fs::remove_dir_all(&out).unwrap();

    let garbage = runs.path().join("garbage.png");
    std::fs::write(&garbage, b"this is not an image").unwrap();
    let missing = runs.path().join("missing.png");
    let nothing = runs.path().join("nothing");
    let empty_run = runs.path().join("no-checkpoint");
    std::fs::create_dir_all(&empty_run).unwrap();
    std::fs::copy(run.join("config.toml"), empty_run.join("config.toml")).unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--run", s(&run), s(good), s(&missing)], "missing.png"),
        (vec!["--run", s(&run), s(good), s(&garbage)], "garbage.png"),
        (vec!["--run", s(&run), "--query", s(&garbage)], "garbage.png"),
        (vec!["--run", s(&empty_run), s(good), s(good)], "no checkpoint"),
        (vec!["--run", s(&nothing), s(good), s(good)], "config.toml"),
        (vec!["--run", s(&run), "--query", s(good), "--split", "bogus"], "bogus"),
        (
            vec!["--run", s(&run), "--query", s(good), "--split", "gallery"],
            "no images in that split",
        ),
        (vec!["--run", s(&run), s(good)], "got 1 image"),
    ];
    for (mut args, wanted) in cases {
        args.extend(["--samples", "2", "--out", s(&out)]);
        let o = report(&args);
        assert!(!o.status.success(), "{args:?} succeeded");
        let e = stderr(&o);
        assert!(e.contains(wanted), "{args:?}: {e}");
        assert_eq!(
            e.lines().filter(|l| l.starts_with("error")).count(),
            1,
            "one error: {e}"
        );
        assert!(!out.exists(), "{args:?} left a report behind");
        let leftovers: Vec<_> = std::fs::read_dir(runs.path())
            .unwrap()
            .filter_map(|d| d.ok())
            .filter(|d| d.file_name().to_string_lossy().contains("staging"))
            .collect();
        assert!(leftovers.is_empty(), "{args:?} left {leftovers:?}");
    }
}

/// An AVSL run: the pair view shows AVSL's graph with the numbers `train explain avsl` computes for
/// the same pair, and the query view ranks by `d̂`, each hit's score being its pair view's `d̂`.
#[test]
fn an_avsl_run_reports_its_graph_and_ranks_by_d_hat() {
    let runs = tempfile::tempdir().unwrap();
    let config = common::tiny_config(
        runs.path(),
        "pa",
        &[
            "avsl.enabled=true",
            "avsl.dim=16",
            "avsl.topk=4",
            "train.epochs=1",
            "train.samples_per_epoch=120",
            "miner=none",
            "loss.name=\"proxy_anchor\"",
        ],
    );
    let run = train(&config, &RunOptions::default(), &Silent).unwrap().run_dir;
    let test = split_images("test");
    let (a, b) = (&test[0].0, &test[5].0);
    let out = runs.path().join("pair");
    let o = report(&["--run", s(&run), "--samples", "2", "--out", s(&out), s(a), s(b)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = json(&out.join("report.json"));
    assert_eq!(r["avsl"]["status"], "available", "{}", r["avsl"]);
    let levels = r["avsl"]["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 3);
    assert_eq!(r["files"]["avsl"].as_array().unwrap().len(), 3);
    for file in r["files"]["avsl"].as_array().unwrap() {
        assert!(image::open(out.join(file.as_str().unwrap())).is_ok(), "{file}");
    }
    let explained = runs.path().join("explained");
    let o = Command::new(env!("CARGO_BIN_EXE_train"))
        .args([
            "explain",
            "avsl",
            "--run",
            s(&run),
            "--top",
            "2",
            "--out",
            s(&explained),
            s(a),
            s(b),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let avsl = json(&explained.join("avsl.json"));
    let d_hat = f(&r["avsl"]["d_hat"]);
    assert_eq!(d_hat, f(&avsl["d_hat"]), "the report's d̂ is explain avsl's");
    for (mine, theirs) in levels.iter().zip(avsl["levels"].as_array().unwrap()) {
        assert_eq!(mine["top_nodes"][0]["node"], theirs["top_nodes"][0]["node"]);
    }

    let qout = runs.path().join("query");
    let o = report(&[
        "--run",
        s(&run),
        "--query",
        s(a),
        "--top",
        "2",
        "--samples",
        "2",
        "--out",
        s(&qout),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let q = json(&qout.join("report.json"));
    let ranking = &q["rankings"][2];
    assert_eq!(ranking["method"], "avsl");
    let hits = ranking["hits"]["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 2);
    assert!(f(&hits[0]["score"]) <= f(&hits[1]["score"]));
    for hit in hits {
        let pair = json(
            &qout
                .join(hit["pair_page"].as_str().unwrap())
                .with_file_name("report.json"),
        );
        // The ranking reads the split's bank embedded in batches of 100, the pair view two images.
        let pair_d = f(&pair["avsl"]["d_hat"]);
        assert!(
            (f(&hit["score"]) - pair_d).abs() < 1e-4 * pair_d.abs().max(1.0),
            "{hit} vs {pair_d}"
        );
    }
}
