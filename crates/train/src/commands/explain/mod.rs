//! `train explain attention|faithfulness|avsl|report|benchmark`: one module per explanation command, each
//! with its arguments and what it prints.

use clap::Subcommand;

use crate::terminal::Terminal;

mod attention;
mod avsl;
mod benchmark;
mod faithfulness;
mod report;

#[derive(Debug, Subcommand)]
pub enum ExplainCommand {
    /// Similarity attention (Zheng et al.): why the given images are (dis)similar, as PNG overlays
    /// and a JSON of the scores.
    ///
    /// Two images are a same-class pair (`--different` for a different-class one), three an
    /// anchor, positive and negative, four add a second negative.
    Attention(attention::AttentionArgs),
    /// Pointing game and IoU of the attention against the synthetic set's object masks (next to a
    /// centre prior), and deletion curves against random erasure.
    Faithfulness(faithfulness::FaithfulnessArgs),
    /// AVSL (Zhang et al.): the similarity graph of two images for a run trained with
    /// `[avsl] enabled = true`: per level, the nodes with the largest attribution and their CAMs
    /// on both images, and the least reliable top-level node's decomposition into lower-level
    /// nodes, as PNGs and a JSON of the numbers.
    Avsl(avsl::AvslArgs),
    /// Every method side by side, as one HTML page with its figures and a report.json: for a pair
    /// (`IMAGE1 IMAGE2`) the global and structural similarities, DIML's marginals and top flows,
    /// similarity attention, AVSL's top nodes (AVSL runs) and SmoothGrad saliency; for a query
    /// (`--query IMAGE`) its top retrievals by global distance, DIML re-ranking and AVSL, each hit
    /// linked to its pair view.
    Report(report::ReportArgs),
    /// Every method the run supports and four baselines (uniform, random, centre prior, edges)
    /// scored on N same-class and N different-class test pairs: localisation against the object
    /// masks, complexity, ROAD's curves of the pair similarity, part-level faithfulness through
    /// counterfactual renders (parts set), partner sensitivity and cascading randomisation; writes
    /// benchmark.md, benchmark.json and benchmark.png.
    Benchmark(benchmark::BenchmarkArgs),
}

/// Runs one explanation command.
pub fn run(command: &ExplainCommand) -> anyhow::Result<()> {
    let progress = Terminal { bars: false };
    match command {
        ExplainCommand::Attention(args) => attention::run(args, &progress),
        ExplainCommand::Faithfulness(args) => faithfulness::run(args, &progress),
        ExplainCommand::Avsl(args) => avsl::run(args, &progress),
        ExplainCommand::Report(args) => report::run(args, &progress),
        ExplainCommand::Benchmark(args) => benchmark::run(args, &progress),
    }
}
