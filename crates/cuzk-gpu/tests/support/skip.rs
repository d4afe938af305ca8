//! The skip every test binary records: one file, included by path (`#[path]`) into the
//! tests of cuzk-gpu, cuzk-filecoin and cuzk, so that `.ci/run`'s count of skips reads one
//! format.

/// Prints `skipped: {reason}` (cargo's capture hides it, and the test counts as passed) and,
/// when `CUZK_SKIP_LOG` names a file, as `.ci/run` sets it, appends `{test}\t{reason}` to
/// it in one write, so that the run can say what did not run and why. Keep `reason` the
/// same at every site that skips for the same cause: `.ci/run` counts per reason.
pub fn skip(reason: &str) {
    println!("skipped: {reason}");
    let Some(log) = std::env::var_os("CUZK_SKIP_LOG") else {
        return;
    };
    let test = std::thread::current().name().unwrap_or("?").to_string();
    let line = format!("{test}\t{reason}\n");
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
    // A skip that cannot be counted must not pass unseen either.
    if let Err(e) = written {
        panic!(
            "CUZK_SKIP_LOG {}: {e}",
            std::path::Path::new(&log).display()
        );
    }
}
