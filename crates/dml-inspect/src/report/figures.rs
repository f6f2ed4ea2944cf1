//! The PNG figures of a pair view, each with its colour bar: the two inputs, DIML's marginals and
//! flows, similarity attention, AVSL's node CAMs per level and SmoothGrad saliency.

use std::path::Path;

use dml_explain::render::{
    FlowLine, FlowStyle, PanelItem, PanelStyle, ValueRange, flow_figure, panel, save_png_atomic,
};
use image::RgbImage;

use crate::avsl::{node_panel, short};
use crate::error::InspectError;

use super::pair_report::{AttentionPair, Availability, AvslPairReport, DimlPair, PairFiles};

/// Writes every figure of a pair into `dir` and returns their names.
///
/// * `rgb`: the two inputs as shown to a person (the evaluation transform's output, denormalised);
/// * `saliency`: the two p99-normalised SmoothGrad maps `[H, W]` with `input_size = [H, W]`.
#[allow(clippy::too_many_arguments)]
pub fn write_pair(
    dir: &Path,
    rgb: &[RgbImage],
    captions: [&str; 2],
    diml: &DimlPair,
    attention: &AttentionPair,
    avsl: &Availability<AvslPairReport>,
    saliency: [&[f32]; 2],
    input_size: [usize; 2],
) -> Result<PairFiles, InspectError> {
    let save = |figure: &RgbImage, name: &str| -> Result<String, InspectError> {
        save_png_atomic(figure, &dir.join(name))?;
        Ok(name.to_string())
    };
    let images = [save(&rgb[0], "image_1.png")?, save(&rgb[1], "image_2.png")?];

    // Two maps per figure on one shared scale, so equal colours mean equal values on both images.
    let two = |maps: [&[f32]; 2], shape: [usize; 2], labels: [String; 2], range: Option<ValueRange>| {
        let items: Vec<PanelItem> = (0..2)
            .map(|i| PanelItem {
                image: &rgb[i],
                map: maps[i],
                map_h: shape[0],
                map_w: shape[1],
                caption: labels[i].as_str(),
            })
            .collect();
        let style = PanelStyle {
            range: Some(range.unwrap_or_else(|| ValueRange::of(&maps))),
            ..PanelStyle::default()
        };
        panel(&items, &style)
    };

    let g = diml.grid;
    let mu: [Vec<f32>; 2] = [0, 1].map(|i| diml.marginals[i].iter().map(|&v| v as f32).collect());
    let marginals = save(
        &two(
            [&mu[0], &mu[1]],
            [g, g],
            [format!("{} mu", captions[0]), format!("{} mu", captions[1])],
            None,
        )?,
        "diml_marginals.png",
    )?;

    let lines: Vec<FlowLine> = diml
        .top_flows
        .iter()
        .map(|f| FlowLine {
            source_cell: f.source_cell,
            target_cell: f.target_cell,
            value: f.contribution as f32,
        })
        .collect();
    let flows_figure = flow_figure(
        &rgb[0],
        &rgb[1],
        [g, g],
        [g, g],
        &lines,
        captions,
        &FlowStyle::default(),
    )?;
    let flows = save(&flows_figure, "diml_flows.png")?;

    let a = &attention;
    let attention_figure = two(
        [&a.maps[0], &a.maps[1]],
        a.map_shape,
        [
            format!("{} s={:.3}", captions[0], a.scores[0]),
            format!("{} s={:.3}", captions[1], a.scores[1]),
        ],
        None,
    )?;
    let attention_file = save(&attention_figure, "attention.png")?;

    let mut avsl_files = Vec::new();
    if let Availability::Available(report) = avsl {
        for (l, level) in report.levels.iter().enumerate() {
            let items: Vec<(usize, &crate::avsl::NodeReport, [String; 2])> = level
                .top_nodes
                .iter()
                .map(|node| {
                    (
                        l,
                        node,
                        [
                            format!("#{} lam {}", node.node, short(node.attribution)),
                            format!("del {}", short(node.delta)),
                        ],
                    )
                })
                .collect();
            let name = format!("avsl_level{l}.png");
            node_panel(rgb, &report.levels, &items, true, &dir.join(&name))?;
            avsl_files.push(name);
        }
    }

    // SmoothGrad maps are already on [0, 1] (divided by their 99th percentile).
    let unit = ValueRange { min: 0.0, max: 1.0 };
    let saliency_figure = two(
        saliency,
        input_size,
        [captions[0].to_string(), captions[1].to_string()],
        Some(unit),
    )?;
    let saliency_file = save(&saliency_figure, "saliency.png")?;
    Ok(PairFiles {
        images,
        marginals,
        flows,
        attention: attention_file,
        avsl: avsl_files,
        saliency: saliency_file,
    })
}
