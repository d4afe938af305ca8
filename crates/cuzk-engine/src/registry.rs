//! [`KindRegistry`]: which proof kinds this engine serves and where their parameters are.
//! A kind plugs in with one [`KindRegistry::register`] call (its parser) and one
//! [`KindRegistry::add_params`] call (its circuit ids → parameter files); the engine never
//! names a kind's circuits itself. The synthetic kind registers through the same calls.
//!
//! ```text
//! registry.register(ProofKindId::PorepSealCommit, |req| cuzk_filecoin::parse(Porep, req));
//! registry.add_params(Arc::new(cuzk_filecoin::ParamFiles));
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cuzk_groth16::{KindError, PartitionedProof, ProofRequest};

use crate::ProofKindId;

/// A kind's parser: validates a request and describes its work.
pub type ParseFn =
    dyn Fn(&ProofRequest) -> Result<Arc<dyn PartitionedProof>, KindError> + Send + Sync;

/// Maps circuit ids to parameter files (and can make test parameters that do not exist).
pub trait ParamsProvider: Send + Sync {
    /// The parameters file of `circuit_id` under `param_dir`, or `None` when this provider
    /// does not know the id.
    fn params_path(&self, circuit_id: &str, param_dir: &Path) -> Option<PathBuf>;

    /// Makes sure `path` exists, generating it if this provider can (synthetic circuits).
    /// The default only checks that it exists.
    ///
    /// # Errors
    /// [`KindError::Other`] naming the missing file or the generator's failure.
    fn ensure(&self, circuit_id: &str, path: &Path) -> Result<(), KindError> {
        if path.is_file() {
            Ok(())
        } else {
            Err(KindError::Other(format!(
                "parameters for {circuit_id} not found at {}",
                path.display()
            )))
        }
    }

    /// Whether `ensure` can create a missing file.
    fn can_generate(&self, _circuit_id: &str) -> bool {
        false
    }
}

/// The proof kinds an engine serves and the parameter files they use.
#[derive(Default)]
pub struct KindRegistry {
    parsers: HashMap<ProofKindId, Arc<ParseFn>>,
    params: Vec<Arc<dyn ParamsProvider>>,
}

impl KindRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        KindRegistry::default()
    }

    /// A registry serving the synthetic kind (parameters generated under the param dir).
    pub fn with_synthetic() -> Self {
        let mut registry = KindRegistry::new();
        crate::synthetic::register(&mut registry);
        registry
    }

    /// Serves `kind` with `parse`, replacing an earlier parser for it.
    pub fn register<F>(&mut self, kind: ProofKindId, parse: F)
    where
        F: Fn(&ProofRequest) -> Result<Arc<dyn PartitionedProof>, KindError>
            + Send
            + Sync
            + 'static,
    {
        self.parsers.insert(kind, Arc::new(parse));
    }

    /// Adds a parameters provider; providers are asked in the order they were added.
    pub fn add_params(&mut self, provider: Arc<dyn ParamsProvider>) {
        self.params.push(provider);
    }

    /// The kinds served, in wire order.
    pub fn kinds(&self) -> Vec<ProofKindId> {
        ProofKindId::ALL
            .into_iter()
            .filter(|k| self.parsers.contains_key(k))
            .collect()
    }

    /// Parses a request of `kind`.
    ///
    /// # Errors
    /// `None` when the kind is not served; the parser's [`KindError`] otherwise.
    pub fn parse(
        &self,
        kind: ProofKindId,
        req: &ProofRequest,
    ) -> Option<Result<Arc<dyn PartitionedProof>, KindError>> {
        self.parsers.get(&kind).map(|parse| parse(req))
    }

    /// The provider that knows `circuit_id` and the file it names.
    pub fn resolve_params(
        &self,
        circuit_id: &str,
        param_dir: &Path,
    ) -> Option<(Arc<dyn ParamsProvider>, PathBuf)> {
        self.params.iter().find_map(|p| {
            p.params_path(circuit_id, param_dir)
                .map(|path| (p.clone(), path))
        })
    }
}
