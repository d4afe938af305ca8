//! One module per subcommand; each owns its `Args` and a `run` function.

pub mod bench_batch;
pub mod bench_gpu;
pub mod bench_prove;
pub mod bench_synth;
pub mod daemon;
pub mod devices;
pub mod gen_params;
pub mod gen_request;
pub mod gen_sector;
pub mod prove;
pub mod prove_filecoin;
pub mod status;

/// `RUST_LOG`-driven logs to stderr, `info` by default; coloured only when stderr is a
/// terminal and `NO_COLOR` is unset or empty (<https://no-color.org>), so that logs sent to
/// a file, a pipe or journald carry no escape codes.
pub fn init_tracing() {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let colour = log_colour(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .init();
}

/// Whether log lines are coloured: on a terminal, unless `NO_COLOR` is set to anything
/// but the empty string.
fn log_colour(stderr_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

/// An error and its causes on one line, as anyhow's `{:#}` prints them, less each cause
/// whose text the line already ends with. Library errors here put their source in their
/// own message (the engine and the daemon pass `to_string()` on to clients) and also return
/// it from `source()`, and tonic nests transport errors that print the same text: `{:#}`
/// alone would say "No such file or directory (os error 2)" twice.
pub fn error_chain(err: &anyhow::Error) -> String {
    let mut line = err.to_string();
    for cause in err.chain().skip(1) {
        let text = cause.to_string();
        if !text.is_empty() && !line.ends_with(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

/// A millisecond figure for a benchmark's JSON line: one decimal.
pub(crate) fn round1(v: f64) -> serde_json::Value {
    serde_json::Value::from((v * 10.0).round() / 10.0)
}

/// theirs ÷ ours for a benchmark's JSON line: three decimals; null when ours is 0.
pub(crate) fn ratio(theirs: f64, ours: f64) -> serde_json::Value {
    if ours > 0.0 {
        serde_json::Value::from((theirs / ours * 1000.0).round() / 1000.0)
    } else {
        serde_json::Value::Null
    }
}

/// Threads this process may run on, as the benchmarks report it.
pub(crate) fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that prints its source and returns it, as `SrsError::Io` does.
    #[derive(Debug)]
    struct Named {
        path: &'static str,
        source: std::io::Error,
    }

    impl std::fmt::Display for Named {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}: {}", self.path, self.source)
        }
    }

    impl std::error::Error for Named {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    #[test]
    fn error_chain_says_each_cause_once() {
        // See: #34
        let io = std::io::Error::from_raw_os_error(2);
        let text = io.to_string();
        let err = anyhow::Error::from(Named {
            path: "/x.params",
            source: io,
        })
        .context("loading the parameters");
        assert_eq!(
            error_chain(&err),
            format!("loading the parameters: /x.params: {text}")
        );
        assert_eq!(
            format!("{err:#}"),
            format!("loading the parameters: /x.params: {text}: {text}")
        );
    }

    #[test]
    fn error_chain_keeps_causes_the_line_does_not_end_with() {
        let err = anyhow::anyhow!("inner").context("middle").context("outer");
        assert_eq!(error_chain(&err), "outer: middle: inner");
    }

    #[test]
    fn logs_are_coloured_only_on_a_terminal_without_no_color() {
        // See: #34
        use std::ffi::OsStr;
        assert!(log_colour(true, None));
        assert!(log_colour(true, Some(OsStr::new(""))));
        assert!(!log_colour(true, Some(OsStr::new("1"))));
        assert!(!log_colour(false, None));
        assert!(!log_colour(false, Some(OsStr::new(""))));
    }
}
