//! `train check`.

use std::path::PathBuf;

use clap::Args;
use dml_train::check::check_run;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The run directory (e.g. runs/default).
    pub run: PathBuf,
}

/// Prints one line per file checked; fails when any has a problem.
pub fn run(args: &CheckArgs) -> anyhow::Result<()> {
    let findings = check_run(&args.run);
    let mut problems = 0;
    for f in &findings {
        match &f.problem {
            None => println!("ok       {}", f.path.display()),
            Some(p) => {
                problems += 1;
                println!("PROBLEM  {}: {p}", f.path.display());
            }
        }
    }
    if problems > 0 {
        anyhow::bail!("{} has {problems} problem(s)", args.run.display());
    }
    println!("{}: sound", args.run.display());
    Ok(())
}
