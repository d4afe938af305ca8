//! The SupraSeal C2 baseline of the head-to-head: its own process (`cuzk-supraseal-bench`,
//! built apart by bench/supraseal/build.sh) and the line protocol spoken with it.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use anyhow::{bail, Context};
use cuzk_groth16::synthetic::SyntheticCircuit;

use super::{Args, Run};
use crate::cmd::prove::ShapeArgs;

/// The SupraSeal baseline process and its line protocol (bench/supraseal/README.md).
pub(super) struct Supraseal {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pub(super) load_ms: f64,
}

impl Supraseal {
    pub(super) fn start(
        bin: &Path,
        params: &Path,
        lg: u32,
        c: &SyntheticCircuit,
        shape: &ShapeArgs,
    ) -> anyhow::Result<Supraseal> {
        let mut child = Command::new(bin)
            .arg("--params")
            .arg(params)
            .args(["--log-n", &lg.to_string()])
            .args(["--seed", &c.seed.to_string()])
            .args(["--witness-seed", &c.witness_seed.to_string()])
            .args(shape.to_args())
            // Repetition 0 of the benchmark is the warm-up for every prover.
            .arg("--no-warmup")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let stdin = child.stdin.take().context("supraseal stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("supraseal stdout")?);
        let mut me = Supraseal {
            child,
            stdin,
            stdout,
            load_ms: 0.0,
        };
        let ready = me.read_event("ready")?;
        me.load_ms = ready["load_ms"].as_f64().unwrap_or(0.0);
        Ok(me)
    }

    fn read_event(&mut self, want: &str) -> anyhow::Result<serde_json::Value> {
        let mut line = String::new();
        loop {
            line.clear();
            if self.stdout.read_line(&mut line)? == 0 {
                bail!("supraseal baseline exited before sending {want:?}");
            }
            // Anything that is not one of our JSON lines is the baseline's own chatter.
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line.trim()) else {
                continue;
            };
            match v["event"].as_str() {
                Some(e) if e == want => return Ok(v),
                Some("error") => bail!("supraseal baseline: {}", v["message"]),
                _ => continue,
            }
        }
    }

    pub(super) fn prove(&mut self, r: blstrs::Scalar, s: blstrs::Scalar) -> anyhow::Result<Run> {
        writeln!(
            self.stdin,
            "prove {} {}",
            hex::encode(r.to_bytes_le()),
            hex::encode(s.to_bytes_le())
        )?;
        self.stdin.flush()?;
        let v = self.read_event("proof")?;
        let bytes = hex::decode(v["proof_hex"].as_str().context("proof_hex missing")?)?;
        let proof = bellperson::groth16::Proof::read(&bytes[..]).context("supraseal proof")?;
        Ok(Run {
            proof,
            ms: v["ms"].as_f64().context("ms missing")?,
            synth_ms: v["synth_ms"].as_f64().unwrap_or(0.0),
            prove_ms: v["c2_ms"].as_f64(),
            consistent: v["c2_identical"].as_bool().unwrap_or(true),
            stages: Vec::new(),
        })
    }
}

impl Drop for Supraseal {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        let _ = self.child.wait();
    }
}

/// The baseline binary: the flag, else beside this executable, else on PATH.
pub(super) fn supraseal_bin(args: &Args) -> PathBuf {
    if let Some(p) = &args.supraseal_bin {
        return p.clone();
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join("cuzk-supraseal-bench")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("cuzk-supraseal-bench"))
}
