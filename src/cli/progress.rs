//! Progress for long operator commands (`migrate`, `sessions export`, `sessions import`).
//!
//! Bars draw on stderr, and only when stderr is a terminal (indicatif hides itself otherwise),
//! so a redirected or piped run carries no bar codes. A bar never prints results: commands
//! print those on stdout through [`ProgressBar::suspend`], which keeps the two from tearing
//! each other on a shared terminal.

use std::io::IsTerminal;
use std::time::Duration;

pub use indicatif::ProgressBar;
use indicatif::ProgressStyle;

/// A bar counting `what` (e.g. "messages"); its length may be set later, once known.
pub fn bar(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} {prefix} [{bar:30}] {pos}/{len} {msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(what.to_string());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// A bar for a command whose results stream to stdout: when stdout is the terminal too, the
/// rows scrolling past are the progress, and a bar would only be torn up by them.
pub fn bar_beside_stdout(len: u64, what: &str) -> ProgressBar {
    if std::io::stdout().is_terminal() {
        ProgressBar::hidden()
    } else {
        bar(len, what)
    }
}
