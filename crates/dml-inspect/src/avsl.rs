//! `train explain avsl`: why an AVSL run finds two images (dis)similar (Zhang et al., Sec. 3.3,
//! Eq. 9–11): the graph of the pair, the nodes of every level with the largest attribution `λ`
//! and their CAMs on both images, and the decomposition of the least reliable top-level node into
//! the lower-level nodes it is rectified with (the weights of `W̃`).

use std::path::{Path, PathBuf};

use burn::tensor::{Tensor, TensorData};
use dml_data::Pipeline;
use dml_explain::avsl::certainty::certainty;
use dml_explain::avsl::graph::{AvslGraph, LevelInput, infer};
use dml_explain::render::{
    GridRow, PanelItem, PanelStyle, ValueRange, map_grid, panel, resize_bilinear, save_png_atomic,
};
use dml_models::AvslLevelOutput;
use serde::Serialize;

use dml_train::avsl_module::AvslModule;
use dml_train::{Progress, RunModel, RunRef, TrainError, data};

use crate::error::InspectError;
use crate::io::{TupleImages, existing_images, load_images, values, write_json};

/// What `train explain avsl` is asked to do.
#[derive(Debug, Clone)]
pub struct AvslRequest {
    /// The run (trained with `[avsl] enabled = true`), its checkpoint and the device.
    pub run: RunRef,
    /// The two images.
    pub images: [PathBuf; 2],
    /// Nodes shown per level (those with the largest attribution).
    pub top: usize,
    /// The output directory.
    pub out: PathBuf,
}

/// One similarity node of the pair.
#[derive(Debug, Clone, Serialize)]
pub struct NodeReport {
    /// Its index in the level.
    pub node: usize,
    /// `δ = (ẽ − ẽ′)²` (Eq. 1).
    pub delta: f32,
    /// The attribution `λ = ∂d̂/∂δ` (Eq. 11).
    pub attribution: f32,
    /// Its share of `d̂`: `λ δ`.
    pub contribution: f32,
    /// Its reliability `p` (levels above the lowest).
    pub reliability: Option<f32>,
    /// CAM certainty `η` on the first and the second image (Eq. 5).
    pub certainty: [f32; 2],
    /// The CAMs `u` on both images at the level's resolution, row-major.
    pub cams: [Vec<f32>; 2],
}

/// One level of the pair's graph.
#[derive(Debug, Clone, Serialize)]
pub struct LevelReport {
    /// The backbone stage.
    pub stage: String,
    /// Its distance `d^l = Σ δ` (un-rectified).
    pub distance: f32,
    /// `Σ λ` over the level's nodes.
    pub attribution_sum: f32,
    /// The CAMs' resolution `[h, w]`.
    pub map_shape: [usize; 2],
    /// The smallest, mean and largest reliability `p` over the level's nodes for this pair
    /// (levels above the lowest; every node starts at 0.5 before training).
    pub reliability: Option<[f32; 3]>,
    /// The nodes with the largest attribution, largest first.
    pub top_nodes: Vec<NodeReport>,
}

/// One lower-level node a top-level node is rectified with.
#[derive(Debug, Clone, Serialize)]
pub struct Contributor {
    /// Its index in the level below.
    pub node: usize,
    /// The edge weight `W̃` (the column sums to 1).
    pub weight: f32,
    /// Its node value `δ` on the level below (before that level's own rectification).
    pub delta: f32,
}

/// The least reliable top-level node and the lower-level nodes it draws on.
#[derive(Debug, Clone, Serialize)]
pub struct Decomposition {
    /// The top-level node.
    pub node: NodeReport,
    /// The lower-level nodes with a non-zero edge, by weight, largest first.
    pub contributors: Vec<Contributor>,
}

/// The JSON written next to the figures (`avsl.json`).
#[derive(Debug, Clone, Serialize)]
pub struct AvslReport {
    /// The checkpoint explained.
    pub checkpoint: PathBuf,
    /// The two images.
    pub images: [PathBuf; 2],
    /// The overall distance `d̂` (Eq. 9).
    pub d_hat: f32,
    /// `Σ_l Σ λ ⊙ δ`, equal to `d̂` (Property 1).
    pub recomposed: f32,
    /// The levels, low to high.
    pub levels: Vec<LevelReport>,
    /// The least reliable top-level node's decomposition.
    pub decomposition: Decomposition,
    /// The files written.
    pub files: Vec<PathBuf>,
}

/// The numbers of one pair's AVSL graph: `d̂`, its recomposition, the `top` nodes of every level
/// and the least reliable top-level node's decomposition.
pub struct AvslPair {
    /// The overall distance `d̂` (Eq. 9).
    pub d_hat: f32,
    /// `Σ_l Σ λ ⊙ δ` (Property 1).
    pub recomposed: f32,
    /// The levels, low to high, each with its `top` nodes by attribution.
    pub levels: Vec<LevelReport>,
    /// The least reliable top-level node and its lower-level contributors.
    pub decomposition: Decomposition,
    /// The strongest contributor's own node report on the level below, if any.
    pub strongest: Option<NodeReport>,
}

/// The AVSL graph of one pair and what it was inferred from.
struct PairGraph {
    /// Every level's embedder output for both images.
    outputs: Vec<AvslLevelOutput>,
    /// Every level's node certainties `η` `[2, R_l]`.
    etas: Vec<Tensor<2>>,
    /// The top-k edges between consecutive levels.
    links: Vec<Tensor<2>>,
    /// The inferred graph.
    graph: AvslGraph,
}

/// Runs `run.model`'s backbone and the AVSL `module` on the two images of `pair` (`[2, 3, H, W]`)
/// and infers their graph (Zhang et al., Eq. 9).
fn pair_graph(run: &RunModel, module: &AvslModule, pair: &TupleImages) -> Result<PairGraph, InspectError> {
    let images = Tensor::<4>::from_data(
        TensorData::new(pair.values.clone(), [2, 3, pair.height, pair.width]),
        &run.device,
    );
    let outputs = module.embedder.forward(&run.model.backbone.forward_features(images));
    let avsl = &run.config.avsl;
    let fail = |e| InspectError::Run(TrainError::method("avsl", e));
    let links = module.memory.stars(avsl.topk).map_err(fail)?;
    let etas: Vec<Tensor<2>> = outputs
        .iter()
        .map(|o| certainty(o.cam.clone(), avsl.certainty))
        .collect();
    let levels: Vec<LevelInput> = outputs
        .iter()
        .zip(&etas)
        .map(|(o, eta)| LevelInput {
            query: o.embedding.clone().narrow(0, 0, 1),
            reference: o.embedding.clone().narrow(0, 1, 1),
            query_certainty: eta.clone().narrow(0, 0, 1),
            reference_certainty: eta.clone().narrow(0, 1, 1),
        })
        .collect();
    let graph = infer(&levels, &links, &module.reliability.regressions(), avsl.gamma).map_err(fail)?;
    Ok(PairGraph {
        outputs,
        etas,
        links,
        graph,
    })
}

/// AVSL's attribution-weighted CAM of the first image of `pair` (`[2, 3, H, W]`) explained against
/// the second: `Σ_l Σ_j λ_lj · CAM_lj`, every level's node CAMs (`[R_l, h_l, w_l]`) weighted by the
/// node's attribution `λ` (Eq. 10–11) and upsampled bilinearly to `[H, W]`. Where `d̂ = Σ λ ⊙ δ`
/// (Property 1), the map shows where the nodes that carry the pair's distance look.
pub fn avsl_attribution_map(run: &RunModel, module: &AvslModule, pair: &TupleImages) -> Result<Vec<f32>, InspectError> {
    let PairGraph {
        outputs, links, graph, ..
    } = pair_graph(run, module, pair)?;
    let lambda: Vec<Vec<f32>> = graph.attribution(&links).into_iter().map(values).collect();
    let (h, w) = (pair.height, pair.width);
    let mut map = vec![0.0f32; h * w];
    for (output, lambda) in outputs.iter().zip(&lambda) {
        let [_, r, lh, lw] = output.cam.dims();
        let cams = values(output.cam.clone().narrow(0, 0, 1));
        let mut level = vec![0.0f32; lh * lw];
        for (j, weight) in lambda.iter().enumerate().take(r) {
            for (m, c) in level.iter_mut().zip(&cams[j * lh * lw..(j + 1) * lh * lw]) {
                *m += weight * c;
            }
        }
        for (m, u) in map.iter_mut().zip(resize_bilinear(&level, lh, lw, h, w)?) {
            *m += u;
        }
    }
    Ok(map)
}

/// Runs the AVSL graph of `run` (its `module`) on the two images of `pair` (`[2, 3, H, W]`, the
/// evaluation transform's output) and reads back the `top` nodes of every level (Zhang et al.,
/// Eq. 9–11).
pub fn avsl_pair(
    run: &RunModel,
    module: &AvslModule,
    pair: &TupleImages,
    top: usize,
) -> Result<AvslPair, InspectError> {
    let req_top = top;
    let PairGraph {
        outputs,
        etas,
        links,
        graph,
    } = pair_graph(run, module, pair)?;
    let attribution = graph.attribution(&links);
    let recomposed = values(graph.recomposed(&attribution))[0];
    let lambda: Vec<Vec<f32>> = attribution.into_iter().map(values).collect();
    let deltas: Vec<Vec<f32>> = graph.nodes.iter().cloned().map(values).collect();
    let reliability: Vec<Vec<f32>> = graph.reliability.iter().cloned().map(values).collect();
    let stage_names = run.model.backbone.stage_names();
    // Every level's CAMs and certainties are read back once, for all the nodes shown.
    let cams: Vec<Vec<f32>> = outputs.iter().map(|o| values(o.cam.clone())).collect();
    let etas: Vec<Vec<f32>> = etas.into_iter().map(values).collect();
    let node_report = |l: usize, j: usize| -> NodeReport {
        let [_, r, h, w] = outputs[l].cam.dims();
        let (maps, eta) = (&cams[l], &etas[l]);
        let plane = |b: usize| maps[(b * r + j) * h * w..(b * r + j + 1) * h * w].to_vec();
        NodeReport {
            node: j,
            delta: deltas[l][j],
            attribution: lambda[l][j],
            contribution: lambda[l][j] * deltas[l][j],
            reliability: (l > 0).then(|| reliability[l - 1][j]),
            certainty: [eta[j], eta[r + j]],
            cams: [plane(0), plane(1)],
        }
    };
    let level_reports: Vec<LevelReport> = (0..outputs.len())
        .map(|l| {
            let [_, _, h, w] = outputs[l].cam.dims();
            let mut order: Vec<usize> = (0..lambda[l].len()).collect();
            order.sort_by(|&a, &b| lambda[l][b].total_cmp(&lambda[l][a]).then(a.cmp(&b)));
            LevelReport {
                stage: stage_names[module.embedder.stages[l]].to_string(),
                distance: deltas[l].iter().sum(),
                attribution_sum: lambda[l].iter().sum(),
                map_shape: [h, w],
                reliability: (l > 0).then(|| {
                    let p = &reliability[l - 1];
                    let min = p.iter().copied().fold(f32::INFINITY, f32::min);
                    let max = p.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    [min, p.iter().sum::<f32>() / p.len().max(1) as f32, max]
                }),
                top_nodes: order.iter().take(req_top).map(|&j| node_report(l, j)).collect(),
            }
        })
        .collect();
    // The least reliable top-level node, and the column of W̃ it is rectified with.
    let top = outputs.len() - 1;
    let p_top = &reliability[top - 1];
    let weakest = (0..p_top.len())
        .min_by(|&a, &b| p_top[a].total_cmp(&p_top[b]).then(a.cmp(&b)))
        .unwrap_or(0);
    let w = values(links[top - 1].clone());
    let r_top = p_top.len();
    let mut contributors: Vec<Contributor> = (0..w.len() / r_top)
        .filter_map(|i| {
            let weight = w[i * r_top + weakest];
            (weight > 0.0).then(|| Contributor {
                node: i,
                weight,
                delta: deltas[top - 1][i],
            })
        })
        .collect();
    contributors.sort_by(|a, b| b.weight.total_cmp(&a.weight).then(a.node.cmp(&b.node)));
    let decomposition = Decomposition {
        node: node_report(top, weakest),
        contributors,
    };

    let strongest = decomposition.contributors.first().map(|c| node_report(top - 1, c.node));
    let d_hat: f32 = values(graph.distance.clone())[0];
    Ok(AvslPair {
        d_hat,
        recomposed,
        levels: level_reports,
        decomposition,
        strongest,
    })
}

/// A caption number in at most 7 characters that keeps small values readable: `0.52`, `3.1e-5`
/// (a node's δ is often 1e-6–1e-4, which two decimals would show as `0.00`).
pub(crate) fn short(v: f32) -> String {
    if v != 0.0 && v.abs() < 0.01 {
        format!("{v:.1e}")
    } else {
        format!("{v:.2}")
    }
}

/// Draws the CAMs of `items` (each a level index, a node and the captions of its two columns) over
/// both images `rgb` and writes the figure to `path`. Each node fills two columns (the first and
/// the second image), captioned with two halves of its label so that neither runs into the next
/// column. With `shared_scale` (nodes of one level) every map shares one colour bar, so the CAMs
/// compare directly; without it (nodes of different levels, whose CAMs have different ranges) each
/// node gets its own panel and colour bar, side by side.
pub fn node_panel(
    rgb: &[image::RgbImage],
    levels: &[LevelReport],
    items: &[(usize, &NodeReport, [String; 2])],
    shared_scale: bool,
    path: &Path,
) -> Result<(), InspectError> {
    let panel_of = |items: &[(usize, &NodeReport, [String; 2])]| -> Result<image::RgbImage, InspectError> {
        let panel_items: Vec<PanelItem> = items
            .iter()
            .flat_map(|(l, node, captions)| {
                let shape = levels[*l].map_shape;
                (0..2).map(move |b| PanelItem {
                    image: &rgb[b],
                    map: &node.cams[b],
                    map_h: shape[0],
                    map_w: shape[1],
                    caption: captions[b].as_str(),
                })
            })
            .collect();
        let maps: Vec<&[f32]> = panel_items.iter().map(|i| i.map).collect();
        let style = PanelStyle {
            range: Some(ValueRange::of(&maps)),
            ..PanelStyle::default()
        };
        Ok(panel(&panel_items, &style)?)
    };
    let figure = if shared_scale || items.len() < 2 {
        panel_of(items)?
    } else {
        let panels = items
            .iter()
            .map(|item| panel_of(std::slice::from_ref(item)))
            .collect::<Result<Vec<_>, _>>()?;
        let gap = 16;
        let width = panels.iter().map(|p| p.width() + gap).sum::<u32>() - gap;
        let height = panels.iter().map(image::RgbImage::height).max().unwrap_or(1);
        let mut figure = image::RgbImage::from_pixel(width, height, image::Rgb([255, 255, 255]));
        let mut x = 0;
        for p in &panels {
            image::imageops::replace(&mut figure, p, i64::from(x), 0);
            x += p.width() + gap;
        }
        figure
    };
    save_png_atomic(&figure, path)?;
    Ok(())
}

/// Explains the pair of `req` with the run's AVSL graph: writes `avsl_level<l>_node<j>.png` (the
/// node's CAM over both images, one colour bar) for the `top` nodes of every level,
/// `avsl_summary.png` (every shown node's CAM, min-max normalised, over both images),
/// `avsl_decomposition.png` (the least reliable top-level node and its strongest lower-level
/// node) and `avsl.json` ([`AvslReport`]) into `req.out`.
pub fn explain_avsl(req: &AvslRequest, progress: &dyn Progress) -> Result<AvslReport, InspectError> {
    existing_images(req.images.iter().map(PathBuf::as_path))?;
    if req.top == 0 {
        return Err(InspectError::Argument("--top: must be at least 1".into()));
    }
    let run = req.run.load(progress)?;
    let module = run.avsl.as_ref().ok_or_else(|| {
        InspectError::Argument(format!(
            "run {} was not trained with [avsl] enabled = true; explain avsl needs its graph",
            req.run.run.display()
        ))
    })?;
    let pair = load_images(&req.images, &Pipeline::new(data::eval_transform(&run.config.data))?)?;
    let AvslPair {
        d_hat,
        recomposed,
        levels: level_reports,
        decomposition,
        strongest,
    } = avsl_pair(&run, module, &pair, req.top)?;
    let top = level_reports.len() - 1;
    std::fs::create_dir_all(&req.out).map_err(|e| InspectError::io(&req.out, e))?;
    let rgb = pair.rgb(&run.config)?;
    let mut files = Vec::new();
    let rgb = &rgb;
    let node_panel = |items: Vec<(usize, &NodeReport, [String; 2])>, shared: bool, path: &Path| {
        node_panel(rgb, &level_reports, &items, shared, path)
    };
    for (l, level) in level_reports.iter().enumerate() {
        for node in &level.top_nodes {
            let path = req.out.join(format!("avsl_level{l}_node{}.png", node.node));
            let caption = [
                format!("{} #{}", level.stage, node.node),
                format!("lam {} del {}", short(node.attribution), short(node.delta)),
            ];
            node_panel(vec![(l, node, caption)], true, &path)?;
            files.push(path);
        }
    }
    let path = req.out.join("avsl_decomposition.png");
    let d = &decomposition;
    let mut items = vec![(
        top,
        &d.node,
        [
            format!(
                "{} #{} rel {}",
                level_reports[top].stage,
                d.node.node,
                short(d.node.reliability.unwrap_or(f32::NAN))
            ),
            String::new(),
        ],
    )];
    if let (Some(c), Some(node)) = (d.contributors.first(), strongest.as_ref()) {
        items.push((
            top - 1,
            node,
            [
                format!("{} #{} w {}", level_reports[top - 1].stage, c.node, short(c.weight)),
                String::new(),
            ],
        ));
    }
    node_panel(items, false, &path)?;
    files.push(path);
    // The summary: both images in rows, every shown node's CAM (min-max normalised on its own,
    // upsampled to the image) in the columns.
    let mut columns = Vec::new();
    let mut maps: [Vec<Vec<f32>>; 2] = [Vec::new(), Vec::new()];
    for level in &level_reports {
        for node in &level.top_nodes {
            columns.push(format!("{} #{}", level.stage, node.node));
            for (side, cam) in maps.iter_mut().zip(&node.cams) {
                let [h, w] = level.map_shape;
                let up = resize_bilinear(cam, h, w, pair.height, pair.width)?;
                side.push(ValueRange::of(&[&up]).normalise_all(&up));
            }
        }
    }
    let rows: Vec<GridRow> = (0..2)
        .map(|b| GridRow {
            image: &rgb[b],
            maps: maps[b].iter().map(Vec::as_slice).collect(),
        })
        .collect();
    let summary = map_grid(&rows, &columns, 96, 1)?;
    let path = req.out.join("avsl_summary.png");
    save_png_atomic(&summary, &path)?;
    files.push(path);

    let report = AvslReport {
        checkpoint: run.checkpoint.clone(),
        images: req.images.clone(),
        d_hat,
        recomposed,
        levels: level_reports,
        decomposition,
        files: files.clone(),
    };
    write_json(&req.out.join("avsl.json"), &report)?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    #[test]
    fn small_caption_numbers_stay_readable() {
        assert_eq!(super::short(0.5234), "0.52");
        assert_eq!(super::short(3.14e-5), "3.1e-5");
        assert_eq!(super::short(0.0), "0.00");
        assert_eq!(super::short(-0.004), "-4.0e-3");
    }
}
