//! Shared output helpers: JSON for machines, a progress bar only on a terminal.

use std::io::{ErrorKind, IsTerminal, Write};

use indicatif::{ProgressBar, ProgressStyle};

/// `println!` without its panic: a reader that closed stdout (`| head`) ends the output
/// quietly. `println!` and `eprintln!` are denied in this crate (main.rs) so none comes back.
macro_rules! stdout_line {
    ($($arg:tt)*) => {
        $crate::cli::output::write_line(&mut std::io::stdout().lock(), format_args!($($arg)*))
    };
}

/// `eprintln!` without its panic: `ctxhost … 2>&1 | true` closes stderr before the error is
/// written, and the exit code must still say what happened (1), not 101.
macro_rules! stderr_line {
    ($($arg:tt)*) => {
        $crate::cli::output::write_line(&mut std::io::stderr().lock(), format_args!($($arg)*))
    };
}

pub(crate) use {stderr_line, stdout_line};

/// Writes one line; a closed pipe (or any failed write) is not worth a panic: there is nobody
/// left to read what would explain it.
pub(crate) fn write_line(out: &mut impl Write, line: std::fmt::Arguments<'_>) {
    let _ = out.write_fmt(line).and_then(|()| out.write_all(b"\n"));
}

pub(super) fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    match writeln!(std::io::stdout().lock(), "{text}") {
        // The reader went away (`| head`): nothing left to tell it.
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// What a command found or did: its fields are the `--json` output, [`Report::lines`] what a
/// person reads.
pub(super) trait Report: serde::Serialize {
    fn lines(&self) -> Vec<String>;
}

/// Prints a report as JSON (`json`) or as its lines.
pub(super) fn emit(report: &impl Report, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(report);
    }
    let mut out = Out::new();
    for line in report.lines() {
        out.line(line);
    }
    Ok(())
}

/// Lines for stdout. `println!` panics (exit 101) when the reader has closed the pipe
/// (`ctxhost replay FILE | head`); this stops writing quietly instead.
#[derive(Default)]
pub(super) struct Out {
    stopped: bool,
}

impl Out {
    pub(super) fn new() -> Self {
        Self::default()
    }

    pub(super) fn line(&mut self, text: String) {
        if self.stopped {
            return;
        }
        if let Err(e) = writeln!(std::io::stdout().lock(), "{text}") {
            self.stopped = true;
            if e.kind() != ErrorKind::BrokenPipe {
                stderr_line!("warning: cannot write to stdout: {e}");
            }
        }
    }
}

/// Thousands separators for token figures, as the report writes them.
pub(super) use ctxhost_report::thousands;

/// A progress bar on stderr when it is a terminal; silent when piped.
pub(super) struct Bar(Option<ProgressBar>);

impl Bar {
    pub(super) fn new(label: &str) -> Self {
        if !std::io::stderr().is_terminal() {
            return Self(None);
        }
        let bar = ProgressBar::new(0);
        if let Ok(style) =
            ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} messages ({eta})")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(label.to_string());
        Self(Some(bar))
    }

    /// A spinner on stderr when it is a terminal, for work whose progress is not counted.
    pub(super) fn spinner(label: &str) -> Self {
        if !std::io::stderr().is_terminal() {
            return Self(None);
        }
        let bar = ProgressBar::new_spinner();
        bar.set_message(label.to_string());
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        Self(Some(bar))
    }

    pub(super) fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

impl ctxhost::replay::Progress for Bar {
    fn advance(&mut self, done: usize, total: usize) {
        if let Some(bar) = &self.0 {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    }

    fn before_auto_compaction(&mut self, due: &ctxhost::auto_compaction::AutoCompaction) {
        let line = format!("notice: {due}");
        match &self.0 {
            Some(bar) => bar.suspend(|| stderr_line!("{line}")),
            None => stderr_line!("{line}"),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn thousands_groups_digits() {
        assert_eq!(super::thousands(0), "0");
        assert_eq!(super::thousands(999), "999");
        assert_eq!(super::thousands(1000), "1,000");
        assert_eq!(super::thousands(1234567), "1,234,567");
    }
}
