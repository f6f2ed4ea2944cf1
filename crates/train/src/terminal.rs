//! The command line's side of [`dml_train::Progress`]: indicatif bars on stderr, evaluations on
//! stdout, notes on stderr.

use dml_train::metrics::MetricsRecord;
use dml_train::progress::{Bar, Event, Progress};

/// Prints what a run reports; draws bars unless they are turned off (`--quiet`; indicatif hides
/// them anyway when stderr is not a terminal).
pub struct Terminal {
    /// Draw progress bars.
    pub bars: bool,
}

impl Progress for Terminal {
    fn event(&self, event: Event<'_>) {
        match event {
            Event::Note(text) => eprintln!("{text}"),
            Event::Evaluated(record) => println!("{}", record_line(record)),
            Event::EpochDone {
                epoch,
                epochs,
                loss,
                images_per_sec,
            } => eprintln!("epoch {epoch}/{epochs}: loss {loss:.4}, {images_per_sec:.0} img/s"),
        }
    }

    fn bar(&self, len: usize, label: &str) -> Box<dyn Bar + '_> {
        if !self.bars {
            return Box::new(Indicatif(indicatif::ProgressBar::hidden()));
        }
        let bar = indicatif::ProgressBar::new(len as u64);
        if let Ok(style) = indicatif::ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(label.to_string());
        Box::new(Indicatif(bar))
    }
}

/// An indicatif bar as a [`Bar`].
struct Indicatif(indicatif::ProgressBar);

impl Bar for Indicatif {
    fn step(&self, message: Option<&str>) {
        if let Some(m) = message {
            self.0.set_message(m.to_string());
        }
        self.0.inc(1);
    }

    fn finish(&self) {
        self.0.finish_and_clear();
    }
}

/// One evaluation of a training run as the line it prints:
/// `epoch   1 | test P@1 0.6 R-P 0.4 MAP@R 0.3 | val … | loss … | … img/s | ϕ_s …`.
pub fn record_line(r: &MetricsRecord) -> String {
    let val = r.val.map_or(String::new(), |v| {
        format!(" | val P@1 {:.4} MAP@R {:.4}", v.precision_at_1, v.map_at_r)
    });
    let loss = r.train_loss.map_or(String::new(), |l| format!(" | loss {l:.4}"));
    let speed = r.images_per_sec.map_or(String::new(), |s| format!(" | {s:.0} img/s"));
    let factor = r.geodesic.map_or(String::new(), |g| {
        format!(
            " | ϕ_s {:.3} ({} of {} batches neutral)",
            g.mean_phi_s().unwrap_or(1.0),
            g.degenerate(),
            g.batches
        )
    });
    format!(
        "epoch {:>3} | {} P@1 {:.4} R-P {:.4} MAP@R {:.4}{val}{loss}{speed}{factor}",
        r.epoch, r.split, r.metrics.precision_at_1, r.metrics.r_precision, r.metrics.map_at_r
    )
}

/// A duration as people read it: `42.3 s`, `3 min 05 s`, `1 h 02 min`.
pub fn wall_time(d: std::time::Duration) -> String {
    let s = d.as_secs_f64();
    let whole = d.as_secs();
    if s < 60.0 {
        format!("{s:.1} s")
    } else if whole < 3600 {
        format!("{} min {:02} s", whole / 60, whole % 60)
    } else {
        format!("{} h {:02} min", whole / 3600, (whole % 3600) / 60)
    }
}
