//! `cargo xtask bench [--peers] [--only …] [--out bench.json]`: every bench of the workspace in
//! one command, and with `--peers` the same workloads in PyTorch, pytorch-metric-learning, POT
//! and faiss, interleaved in the same run, into one JSON file and a markdown table of ratios.
//!
//! The selected benches are built once (`cargo bench --workspace --bench … --no-run`: with
//! `--workspace` the feature set is the tests', so no second Burn build is made) and their
//! executables run directly. Each
//! repeat runs every selected bench and then its peer, so both sides of a ratio are measured
//! minutes apart on the same machine; the ratio is the peer's time over ours per repeat,
//! summarised by its median and range (`summary.rs`). The peers live in `xtask/peers/` and run in
//! a virtual environment under the target directory that this command creates with pip
//! (`python.rs`); the tests never need it.

pub mod catalogue;
pub mod machine;
pub mod python;
pub mod record;
pub mod summary;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Args;
use serde::{Deserialize, Serialize};

use catalogue::Entry;
use record::{Record, Side};

/// Arguments of `cargo xtask bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Also run each workload in its peer library (PyTorch, pytorch-metric-learning, POT, faiss)
    /// from a Python environment created under the target directory with pip.
    #[arg(long)]
    pub peers: bool,
    /// Benches to run, by name (repeat the flag or separate with commas; `--list` shows them).
    /// Default: every bench except the half-hour `retrieval-1m`.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// The JSON report (every measurement, the comparisons, the machine); the markdown table is
    /// written beside it with the extension `.md`.
    #[arg(long, default_value = "bench.json")]
    pub out: PathBuf,
    /// How many times each bench (and its peer) runs, interleaved.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// The cargo profile the benches are built with: `bench` (release settings), or `dev` to
    /// reuse the test build (its dependencies and hot crates are optimised too).
    #[arg(long, default_value = "bench")]
    pub profile: String,
    /// The device of the benches that take one (`flex`, `ndarray`, `wgpu`, `cuda`, …); with a GPU
    /// device the peers that take a device run on CUDA.
    #[arg(long)]
    pub device: Option<String>,
    /// The Python 3 that creates the peer environment.
    #[arg(long, default_value = "python3")]
    pub python: String,
    /// List the benches and exit.
    #[arg(long)]
    pub list: bool,
    /// Summarise the measurements of an earlier report again (after recording why a peer is
    /// faster in `catalogue::EXPLAINED`, say) instead of running anything; writes `--out` and
    /// its table.
    #[arg(long, value_name = "REPORT")]
    pub from: Option<PathBuf>,
}

/// A bench or peer run that failed; the others still run and are written.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Failure {
    /// The catalogue entry.
    pub entry: String,
    /// Ours or the peer.
    pub side: Side,
    /// The repeat (0-based).
    pub repeat: usize,
    /// What went wrong, with the end of the program's error output.
    pub message: String,
}

/// What a run measured and where: everything of the JSON report except the summary, which is
/// always computed from `records` (so `--from` can summarise an earlier report again).
#[derive(Debug, Serialize, Deserialize)]
struct Run {
    date: String,
    machine: machine::Machine,
    command: String,
    profile: String,
    device: Option<String>,
    repeats: usize,
    peers: bool,
    failures: Vec<Failure>,
    records: Vec<Record>,
}

/// The JSON report: the run and its summary.
#[derive(Debug, Serialize)]
struct Report<'a> {
    #[serde(flatten)]
    run: &'a Run,
    summary: summary::Summary,
}

/// Runs `cargo xtask bench`.
pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    if args.list {
        for e in catalogue::ENTRIES {
            let peer = e
                .peer
                .map_or("no peer".to_string(), |p| format!("peer xtask/peers/{}", p.script));
            let default = if e.default { "" } else { ", only with --only" };
            println!("{:<13} {} ({peer}{default})", e.name, e.what);
        }
        return Ok(());
    }
    let run = match &args.from {
        Some(path) => {
            let text = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            serde_json::from_slice::<Run>(&text)
                .with_context(|| format!("{} is not a report of `cargo xtask bench`", path.display()))?
        }
        None => measure_all(args)?,
    };
    let summary = summary::summarise(&run.records);
    let context = format!(
        "Measured {} on {}, `{}` (profile `{}`, {} repeat{}; each ratio is the peer's time over ours \
         in the same repeat, median and range; above 1 ours is faster).",
        run.date,
        run.machine.line(),
        run.command,
        run.profile,
        run.repeats,
        if run.repeats == 1 { "" } else { "s" }
    );
    let table = summary::markdown(&summary, &context);
    let json = serde_json::to_string_pretty(&Report { run: &run, summary }).expect("the report serialises");
    let md_path = args.out.with_extension("md");
    dml_data::write_atomic(&args.out, json.as_bytes())?;
    dml_data::write_atomic(&md_path, table.as_bytes())?;
    println!("\n{table}");
    println!("wrote {} and {}", args.out.display(), md_path.display());
    if !run.failures.is_empty() {
        let list: Vec<String> = run
            .failures
            .iter()
            .map(|f| format!("{} ({:?}, repeat {}): {}", f.entry, f.side, f.repeat + 1, f.message))
            .collect();
        bail!(
            "{} run(s) failed; the others are in the report:\n{}",
            run.failures.len(),
            list.join("\n")
        );
    }
    Ok(())
}

/// Builds and runs the selected benches (and peers) for every repeat.
fn measure_all(args: &BenchArgs) -> anyhow::Result<Run> {
    if args.repeats == 0 {
        bail!("--repeats 0: at least one repeat is needed");
    }
    let entries = catalogue::select(&args.only)?;
    let root = dml_testkit::workspace_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let python = if args.peers {
        let venv = target_dir(&cargo, &root)?.join("peers-venv");
        Some(python::environment(
            &venv,
            &root.join("xtask/peers/requirements.txt"),
            &args.python,
        )?)
    } else {
        None
    };
    let mut targets: Vec<&str> = Vec::new();
    for e in &entries {
        if !targets.contains(&e.target) {
            targets.push(e.target);
        }
    }
    let executables = build(&cargo, &root, &args.profile, &targets)?;
    let peer_device = args.device.as_deref().map(|d| {
        if dml_testkit::bench::names_gpu(d) {
            "cuda"
        } else {
            "cpu"
        }
    });
    let mut collected = Collector {
        root: &root,
        records: Vec::new(),
        failures: Vec::new(),
    };
    for repeat in 0..args.repeats {
        for entry in &entries {
            let exe = executables.get(entry.target).with_context(|| {
                format!(
                    "cargo built no bench target named {:?} (entry {})",
                    entry.target, entry.name
                )
            })?;
            let mut ours = Command::new(exe);
            ours.args(entry.args);
            if let (true, Some(d)) = (entry.takes_device, &args.device) {
                ours.args(["--device", d]);
            }
            let label = format!("[{}/{}] {}", repeat + 1, args.repeats, entry.name);
            collected.measure(ours, Side::Ours, entry, repeat, &label);
            if let (Some(python), Some(peer)) = (&python, entry.peer) {
                let mut command = Command::new(python);
                command.arg(root.join("xtask/peers").join(peer.script)).args(peer.args);
                if let (true, Some(d)) = (peer.takes_device, peer_device) {
                    command.args(["--device", d]);
                }
                collected.measure(command, Side::Peer, entry, repeat, &label);
            }
        }
    }
    Ok(Run {
        date: machine::today(),
        machine: machine::Machine::describe(),
        command: format!("cargo xtask {}", std::env::args().skip(1).collect::<Vec<_>>().join(" ")),
        profile: args.profile.clone(),
        device: args.device.clone(),
        repeats: args.repeats,
        peers: args.peers,
        failures: collected.failures,
        records: collected.records,
    })
}

/// The measurements and failures of a run, gathered as each program ends.
struct Collector<'a> {
    /// Where the programs run.
    root: &'a Path,
    records: Vec<Record>,
    failures: Vec<Failure>,
}

impl Collector<'_> {
    /// Runs one program and keeps its measurement lines, or records why it gave none.
    fn measure(&mut self, mut command: Command, side: Side, entry: &Entry, repeat: usize, label: &str) {
        let who = match side {
            Side::Ours => "ours",
            Side::Peer => "peer",
        };
        eprint!("{label} {who} … ");
        let start = Instant::now();
        let fail = |message: String| Failure {
            entry: entry.name.into(),
            side,
            repeat,
            message,
        };
        let output = match command.current_dir(self.root).stdin(Stdio::null()).output() {
            Ok(o) => o,
            Err(e) => {
                eprintln!("cannot start");
                self.failures
                    .push(fail(format!("cannot start {:?}: {e}", command.get_program())));
                return;
            }
        };
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: String = {
            let lines: Vec<&str> = stderr.lines().collect();
            lines[lines.len().saturating_sub(15)..].join("\n")
        };
        if !output.status.success() {
            eprintln!("failed ({})", output.status);
            self.failures
                .push(fail(format!("exited with {}:\n{tail}", output.status)));
            return;
        }
        match record::parse(&String::from_utf8_lossy(&output.stdout), side, entry.name, repeat) {
            Ok(found) if found.is_empty() => {
                eprintln!("no measurement");
                self.failures
                    .push(fail(format!("printed no measurement line:\n{tail}")));
            }
            Ok(found) => {
                eprintln!("{:.0} s", start.elapsed().as_secs_f64());
                for r in &found {
                    eprintln!("    {:<48} {}", r.id, summary::human_time(r.seconds));
                }
                self.records.extend(found);
            }
            Err(e) => {
                eprintln!("unreadable output");
                self.failures.push(fail(format!("{e:#}")));
            }
        }
    }
}

/// Cargo's target directory for this workspace (`CARGO_TARGET_DIR` or `target/`).
fn target_dir(cargo: &str, root: &Path) -> anyhow::Result<PathBuf> {
    let output = Command::new(cargo)
        .current_dir(root)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run `cargo metadata`")?;
    if !output.status.success() {
        bail!("`cargo metadata` failed ({})", output.status);
    }
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).context("`cargo metadata` printed no JSON")?;
    metadata["target_directory"]
        .as_str()
        .map(PathBuf::from)
        .context("`cargo metadata` names no target directory")
}

/// Builds the bench `targets` with `profile` and returns each bench target's executable.
fn build(cargo: &str, root: &Path, profile: &str, targets: &[&str]) -> anyhow::Result<BTreeMap<String, PathBuf>> {
    eprintln!("building the benches {} (profile {profile}) …", targets.join(", "));
    let output = Command::new(cargo)
        .current_dir(root)
        .args(["bench", "--workspace", "--no-run", "--profile", profile])
        .args(targets.iter().flat_map(|t| ["--bench", t]))
        .args(["--message-format", "json-render-diagnostics"])
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run `cargo bench --no-run`")?;
    if !output.status.success() {
        bail!(
            "building the benches failed ({}); cargo's errors are above",
            output.status
        );
    }
    executables(&String::from_utf8_lossy(&output.stdout))
}

/// The bench executables in cargo's JSON messages, by target name.
fn executables(messages: &str) -> anyhow::Result<BTreeMap<String, PathBuf>> {
    let mut found = BTreeMap::new();
    for line in messages.lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let is_bench = message["target"]["kind"]
            .as_array()
            .is_some_and(|kinds| kinds.iter().any(|k| k == "bench"));
        let (Some(name), Some(exe)) = (message["target"]["name"].as_str(), message["executable"].as_str()) else {
            continue;
        };
        if message["reason"] != "compiler-artifact" || !is_bench {
            continue;
        }
        if let Some(other) = found.insert(name.to_string(), PathBuf::from(exe))
            && other != Path::new(exe)
        {
            bail!("two bench targets are named {name:?}: bench names must be unique in the workspace");
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_executables_come_from_compiler_artifacts() {
        let messages = [
            r#"{"reason":"compiler-artifact","target":{"kind":["lib"],"name":"dml_eval"},"executable":null}"#,
            r#"{"reason":"compiler-artifact","target":{"kind":["bench"],"name":"retrieval"},"executable":"/t/retrieval-1"}"#,
            r#"{"reason":"build-finished","success":true}"#,
        ]
        .join("\n");
        let found = executables(&messages).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found["retrieval"], PathBuf::from("/t/retrieval-1"));
        let twice = format!(
            "{messages}\n{}",
            r#"{"reason":"compiler-artifact","target":{"kind":["bench"],"name":"retrieval"},"executable":"/t/retrieval-2"}"#
        );
        assert!(executables(&twice).unwrap_err().to_string().contains("retrieval"));
    }
}
