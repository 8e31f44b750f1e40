//! Progress of multi-step runs on stderr: an `indicatif` bar when stderr is a
//! terminal, otherwise (pipes, CI logs) one `[i/n] running <step> ...` line
//! per step, so logs stay readable and scripts can follow along.

use std::io::IsTerminal as _;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Counts finished steps out of a known total.
pub struct Progress {
    bar: ProgressBar,
    total: u64,
    started: u64,
}

impl Progress {
    /// A progress display for `total` steps called `unit` (e.g. "cases").
    pub fn new(total: u64, unit: &str) -> Self {
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(total), target);
        let template = format!("{{elapsed_precise}} [{{bar:30}}] {{pos}}/{{len}} {unit}  {{msg}}");
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        Self {
            bar,
            total,
            started: 0,
        }
    }

    /// Announces the next step, `label`.
    pub fn start(&mut self, label: String) {
        self.started += 1;
        if self.bar.is_hidden() {
            eprintln!("[{}/{}] running {label} ...", self.started, self.total);
        }
        self.bar.set_message(label);
    }

    /// Marks the current step finished.
    pub fn finish_step(&self) {
        self.bar.inc(1);
    }

    /// Removes the bar before the results are printed.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
