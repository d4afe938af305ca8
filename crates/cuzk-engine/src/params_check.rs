//! [`ParamsCheck`]: which circuits this engine can prove with the parameter files it has,
//! for readiness. Each circuit id the providers list ([`crate::ParamsProvider::circuit_ids`])
//! is `Ready` when its file is there and whole, `Missing` when there is no file, or
//! `Broken` with the reason when its layout is wrong (a truncated or padded file, an
//! impossible length: [`Srs::check_file`], a few reads) or its last load failed (a bad
//! point, a `.vk` beside it that does not match). A verdict is kept until the file's size
//! or modification time changes, so replacing a broken file brings the circuit back
//! without a restart, and a status read costs one `stat` per listed circuit.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use cuzk_groth16::Srs;
use parking_lot::Mutex;

use crate::KindRegistry;

/// Whether one circuit's parameters can be proved with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamsState {
    /// The file is there and whole.
    Ready,
    /// There is no file.
    Missing,
    /// The file is there and cannot be used; why.
    Broken(String),
}

/// One listed circuit as status reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamsStatus {
    /// The circuit id ("porep-32g").
    pub circuit_id: String,
    /// Its parameters file.
    pub path: PathBuf,
    /// Whether it can be proved with.
    pub state: ParamsState,
}

/// What readiness needs from the parameters, in one value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParamsSummary {
    /// Every listed circuit.
    pub circuits: Vec<ParamsStatus>,
    /// Some provider makes its own parameters (the synthetic kind): there is always
    /// something to prove.
    pub generated: bool,
    /// The parameter directory.
    pub param_dir: PathBuf,
}

impl ParamsSummary {
    /// Why this daemon cannot take proofs for lack of parameters, or `None`: a file that is
    /// there and broken (an operator must replace it, and a balancer must not send work
    /// that fails at once), or no circuit at all that can be proved.
    pub fn not_ready_reason(&self) -> Option<String> {
        let broken: Vec<String> = self
            .circuits
            .iter()
            .filter_map(|c| match &c.state {
                ParamsState::Broken(why) => Some(format!("{} ({why})", c.circuit_id)),
                _ => None,
            })
            .collect();
        if !broken.is_empty() {
            return Some(format!("broken parameters: {}", broken.join("; ")));
        }
        let nothing = !self.generated
            && !self.circuits.is_empty()
            && !self.circuits.iter().any(|c| c.state == ParamsState::Ready);
        nothing.then(|| {
            let dir = self.param_dir.display();
            if self.param_dir.is_dir() {
                format!(
                    "no parameters to prove with: none of the {} parameter files is in {dir}",
                    self.circuits.len()
                )
            } else {
                format!("no parameters to prove with: the parameter directory {dir} does not exist")
            }
        })
    }

    /// The start-up line: why the daemon is not ready, or which circuits it found.
    pub fn log_at_start(&self) {
        let dir = self.param_dir.display();
        match self.not_ready_reason() {
            Some(why) => tracing::warn!(param_dir = %dir, "not ready: {why}"),
            None if !self.circuits.is_empty() => tracing::info!(
                param_dir = %dir,
                ready = ?self
                    .circuits
                    .iter()
                    .filter(|c| c.state == ParamsState::Ready)
                    .map(|c| c.circuit_id.as_str())
                    .collect::<Vec<_>>(),
                "parameters found"
            ),
            None => {}
        }
    }

    /// `circuit_id`'s state; `None` when it is not listed (a generated or unknown id).
    pub fn state_of(&self, circuit_id: &str) -> Option<&ParamsState> {
        self.circuits
            .iter()
            .find(|c| c.circuit_id == circuit_id)
            .map(|c| &c.state)
    }
}

/// A file's identity for caching a verdict: its size and modification time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        let meta = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
        Some(Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
        })
    }
}

/// The parameter files' verdicts, cached per file stamp.
pub struct ParamsCheck {
    param_dir: PathBuf,
    listed: Vec<(String, PathBuf)>,
    generated: bool,
    verdicts: Mutex<HashMap<String, (Stamp, ParamsState)>>,
}

impl ParamsCheck {
    /// The circuits `registry`'s providers list under `param_dir`.
    pub fn new(registry: &KindRegistry, param_dir: &Path) -> ParamsCheck {
        ParamsCheck {
            param_dir: param_dir.to_path_buf(),
            listed: registry.listed_params(param_dir),
            generated: registry.generates_params(),
            verdicts: Mutex::new(HashMap::new()),
        }
    }

    /// Every listed circuit's state now (checking only the files that changed).
    pub fn summary(&self) -> ParamsSummary {
        let circuits = self
            .listed
            .iter()
            .map(|(id, path)| ParamsStatus {
                circuit_id: id.clone(),
                path: path.clone(),
                state: self.state(id, path),
            })
            .collect();
        ParamsSummary {
            circuits,
            generated: self.generated,
            param_dir: self.param_dir.clone(),
        }
    }

    /// Records how a load of `circuit_id`'s file ended: a failure marks it broken until
    /// the file changes; a success marks it ready.
    pub fn loaded(&self, circuit_id: &str, outcome: Result<(), &str>) {
        let Some((_, path)) = self.listed.iter().find(|(id, _)| id == circuit_id) else {
            return;
        };
        let Some(stamp) = Stamp::of(path) else {
            return;
        };
        let state = match outcome {
            Ok(()) => ParamsState::Ready,
            Err(why) => ParamsState::Broken(why.to_string()),
        };
        self.verdicts
            .lock()
            .insert(circuit_id.to_string(), (stamp, state));
    }

    fn state(&self, circuit_id: &str, path: &Path) -> ParamsState {
        let Some(stamp) = Stamp::of(path) else {
            self.verdicts.lock().remove(circuit_id);
            return ParamsState::Missing;
        };
        if let Some((seen, state)) = self.verdicts.lock().get(circuit_id) {
            if *seen == stamp {
                return state.clone();
            }
        }
        let state = match Srs::check_file(path) {
            Ok(_) => ParamsState::Ready,
            Err(e) => ParamsState::Broken(e.to_string()),
        };
        if let ParamsState::Broken(why) = &state {
            tracing::warn!(circuit_id, cause = %why, "parameters file unusable");
        }
        self.verdicts
            .lock()
            .insert(circuit_id.to_string(), (stamp, state.clone()));
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lists one circuit, "c-1", at `DIR/c-1.params`.
    struct OneFile;

    impl crate::ParamsProvider for OneFile {
        fn params_path(&self, circuit_id: &str, param_dir: &Path) -> Option<PathBuf> {
            (circuit_id == "c-1").then(|| param_dir.join("c-1.params"))
        }

        fn circuit_ids(&self) -> Vec<String> {
            vec!["c-1".into()]
        }
    }

    /// A whole `.params` layout (points all zero: only the length prefixes are checked).
    fn whole() -> Vec<u8> {
        let mut out = vec![0u8; 3 * 96 + 3 * 192];
        for (len, point) in [(1u32, 96), (1, 96), (0, 96), (1, 96), (0, 96), (0, 192)] {
            out.extend_from_slice(&len.to_be_bytes());
            out.extend(std::iter::repeat_n(0u8, len as usize * point));
        }
        out
    }

    #[test]
    fn a_file_is_missing_broken_or_ready_and_a_new_file_is_checked_again() {
        let dir = std::env::temp_dir().join(format!("cuzk-params-check-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut registry = KindRegistry::new();
        registry.add_params(std::sync::Arc::new(OneFile));
        let check = ParamsCheck::new(&registry, &dir);

        let s = check.summary();
        assert_eq!(s.state_of("c-1"), Some(&ParamsState::Missing));
        let why = s.not_ready_reason().expect("nothing to prove");
        assert!(why.contains("does not exist"), "{why}");

        std::fs::create_dir_all(&dir).unwrap();
        let why = check.summary().not_ready_reason().expect("still nothing");
        assert!(why.contains("none of the 1 parameter files"), "{why}");

        let file = dir.join("c-1.params");
        let bytes = whole();
        std::fs::write(&file, &bytes[..bytes.len() - 1]).unwrap();
        let s = check.summary();
        match s.state_of("c-1") {
            Some(ParamsState::Broken(why)) => assert!(why.contains("truncated"), "{why}"),
            other => panic!("want broken, got {other:?}"),
        }
        assert!(s
            .not_ready_reason()
            .unwrap()
            .starts_with("broken parameters: c-1 ("));

        std::fs::write(&file, &bytes).unwrap();
        assert_eq!(check.summary().state_of("c-1"), Some(&ParamsState::Ready));
        assert_eq!(check.summary().not_ready_reason(), None);

        // A load that failed on the same file keeps it broken; a new file is checked again.
        check.loaded("c-1", Err("bad point 3 in section h"));
        assert_eq!(
            check.summary().state_of("c-1"),
            Some(&ParamsState::Broken("bad point 3 in section h".into()))
        );
        let mut longer = bytes.clone();
        longer.push(0);
        std::fs::write(&file, &longer).unwrap();
        match check.summary().state_of("c-1") {
            Some(ParamsState::Broken(why)) => assert!(why.contains("trailing"), "{why}"),
            other => panic!("want trailing bytes, got {other:?}"),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_provider_that_makes_its_own_parameters_is_always_ready() {
        let mut registry = KindRegistry::new();
        registry.add_params(std::sync::Arc::new(OneFile));
        crate::synthetic::register(&mut registry);
        let check = ParamsCheck::new(&registry, Path::new("/nonexistent/cuzk"));
        assert_eq!(check.summary().not_ready_reason(), None);
    }
}
