//! `cuzk-supraseal-bench`: the SupraSeal C2 baseline for `cuzk bench prove`.
//!
//! Proves cuzk's synthetic PoRep-shaped circuit with bellperson 0.27's `cuda-supraseal`
//! prover (SupraSeal C2 on the GPU, what Filecoin operators run today), driven over a
//! line protocol on stdin/stdout so that the `cuzk` binary can alternate its own
//! provers' runs with this one in a single session. The protocol is documented in
//! README.md next to this crate; in short:
//!
//! ```text
//! cuzk-supraseal-bench --params FILE --log-n K [--seed S] [--witness-seed W]
//!   -> {"event":"ready","load_ms":..,"warmup_ms":..,...}
//! prove R_HEX S_HEX            (r, s: 32-byte little-endian scalars in hex)
//!   -> {"event":"proof","ms":..,"synth_ms":..,"proof_hex":"..",...}
//! batch K                       (K copies in one create_proof_batch, like a sector's
//!   -> {"event":"batch","proofs":K,"ms":..,"ms_per_proof":..,"verified":..}   partitions)
//! quit                          -> exit 0
//! any failure                   -> {"event":"error","message":".."}, exit 1
//! ```
//!
//! Protocol lines go to the process's original stdout; anything the C++/CUDA side or a
//! library prints is redirected to stderr, so stdout carries only protocol lines.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use bellperson::groth16::{
    create_proof_batch, prepare_verifying_key, verify_proof, ParameterSource, PreparedVerifyingKey,
    Proof, SuprasealParameters, VerifyingKey,
};
use blstrs::{Bls12, Scalar};
use cuzk_groth16::synthetic::{SyntheticCircuit, SyntheticShape};
use ff::Field;
use serde_json::json;

const USAGE: &str =
    "usage: cuzk-supraseal-bench --params FILE --log-n K [--seed S] [--witness-seed W]
       [--a-density F] [--b-density F] [--bit-fraction F] [--inputs N] [--parts N]
       [--no-warmup] [--no-verify]
  --params FILE      bellperson-format parameters for the circuit (`cuzk gen params`)
  --log-n K          log2 of the circuit's domain (constraints + inputs = 2^K rows)
  --seed S           structure seed of the synthetic circuit (default 0, as `cuzk prove`)
  --witness-seed W   witness seed (default: S)
  --a-density, --b-density, --bit-fraction, --inputs, --parts: the shape, as `cuzk prove`
  --no-warmup        skip the untimed warm-up proof before \"ready\"
  --no-verify        do not verify proofs (verification is outside the timed region)
then reads `prove R_HEX S_HEX` / `quit` lines on stdin (see README.md).";

/// Command-line options.
struct Opts {
    params: PathBuf,
    log_n: u32,
    seed: u64,
    witness_seed: Option<u64>,
    a_density: Option<f64>,
    b_density: Option<f64>,
    bit_fraction: Option<f64>,
    inputs: Option<usize>,
    parts: Option<usize>,
    warmup: bool,
    verify: bool,
}

fn parse_args(args: &[String]) -> Result<Opts, String> {
    let mut params = None;
    let mut log_n = None;
    let mut seed = 0u64;
    let mut witness_seed = None;
    let (mut a_density, mut b_density, mut bit_fraction, mut inputs) = (None, None, None, None);
    let mut parts = None;
    let mut warmup = true;
    let mut verify = true;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        // Accept both "--flag value" and "--flag=value".
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => it.next().cloned().ok_or(format!("{name} needs a value")),
            }
        };
        fn num<T: std::str::FromStr>(name: &str, v: String) -> Result<T, String> {
            v.parse().map_err(|_| format!("{name}: cannot parse {v:?}"))
        }
        match flag {
            "--params" => params = Some(PathBuf::from(value(flag)?)),
            "--log-n" => log_n = Some(num(flag, value(flag)?)?),
            "--seed" => seed = num(flag, value(flag)?)?,
            "--witness-seed" => witness_seed = Some(num(flag, value(flag)?)?),
            "--a-density" => a_density = Some(num(flag, value(flag)?)?),
            "--b-density" => b_density = Some(num(flag, value(flag)?)?),
            "--bit-fraction" => bit_fraction = Some(num(flag, value(flag)?)?),
            "--inputs" => inputs = Some(num(flag, value(flag)?)?),
            "--parts" => parts = Some(num(flag, value(flag)?)?),
            "--no-warmup" => warmup = false,
            "--no-verify" => verify = false,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Opts {
        params: params.ok_or("--params FILE is required")?,
        log_n: log_n.ok_or("--log-n K is required")?,
        seed,
        witness_seed,
        a_density,
        b_density,
        bit_fraction,
        inputs,
        parts,
        warmup,
        verify,
    })
}

/// The synthetic circuit exactly as `cuzk prove` / `cuzk gen params` build it from the
/// same flags (crates/cuzk/src/cmd/prove.rs `CircuitArgs::synthetic`).
fn circuit(o: &Opts) -> Result<SyntheticCircuit, String> {
    let d = SyntheticShape::default();
    let shape = SyntheticShape {
        a_aux_fraction: o.a_density.unwrap_or(d.a_aux_fraction),
        b_aux_fraction: o.b_density.unwrap_or(d.b_aux_fraction),
        bit_fraction: o.bit_fraction.unwrap_or(d.bit_fraction),
        n_inputs: o.inputs,
        parts: o.parts.unwrap_or(d.parts),
        ..d
    };
    let c = SyntheticCircuit::with_log_n(o.log_n, o.seed, shape)
        .map_err(|e| format!("synthetic circuit: {e}"))?;
    Ok(c.with_witness_seed(o.witness_seed.unwrap_or(c.seed)))
}

/// What a synthesis leaves for the caller: the public inputs and the sizes SupraSeal's
/// C2 checks against the parameters.
struct Synthesized {
    /// Public inputs without ONE.
    inputs: Vec<Scalar>,
    /// Point counts the parameters must have: (ic, l, a, b_g1).
    counts: [usize; 4],
}

/// One synthesis of the circuit as a prover does it before C2 (ONE, the circuit, an
/// `input · 0 = 0` row per input; a, b, c evaluated, densities tracked), with cuzk's own
/// constraint system: the work bellperson's SupraSeal path does before handing the
/// assignment to C2, timed as `synth_ms`.
fn synthesize(circuit: SyntheticCircuit) -> Result<Synthesized, String> {
    let asg = cuzk_groth16::synthesize(circuit).map_err(|e| e.to_string())?;
    std::hint::black_box((asg.a().len(), asg.b().len(), asg.c().len()));
    let n_inp = asg.input_assignment.len();
    Ok(Synthesized {
        counts: [
            n_inp,
            asg.aux_assignment.len(),
            n_inp + asg.a_aux_density.count_ones(),
            asg.b_input_density.count_ones() + asg.b_aux_density.count_ones(),
        ],
        inputs: asg.input_assignment[1..].to_vec(),
    })
}

/// Point counts in a bellperson parameters file: (ic, l, a, b_g1), read from the section
/// headers (4-byte big-endian counts; G1 points 96 bytes, G2 192, uncompressed).
fn params_counts(path: &std::path::Path) -> Result<[usize; 4], String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = File::open(path).map_err(|e| e.to_string())?;
    let len = f.metadata().map_err(|e| e.to_string())?.len();
    let mut pos = 3 * 96 + 3 * 192; // alpha_g1 beta_g1 beta_g2 gamma_g2 delta_g1 delta_g2
    let mut count = |f: &mut File, point: u64| -> Result<usize, String> {
        if pos + 4 > len {
            return Err(format!("truncated at byte {pos} of {len}"));
        }
        f.seek(SeekFrom::Start(pos)).map_err(|e| e.to_string())?;
        let mut b = [0u8; 4];
        f.read_exact(&mut b).map_err(|e| e.to_string())?;
        let n = u32::from_be_bytes(b) as u64;
        pos += 4 + n * point;
        Ok(n as usize)
    };
    let ic = count(&mut f, 96)?;
    let _h = count(&mut f, 96)?;
    let l = count(&mut f, 96)?;
    let a = count(&mut f, 96)?;
    let b_g1 = count(&mut f, 96)?;
    let b_g2 = count(&mut f, 192)?;
    if pos > len || b_g2 != b_g1 {
        return Err(format!(
            "layout mismatch ({pos} bytes expected, file has {len})"
        ));
    }
    Ok([ic, l, a, b_g1])
}

/// Writes protocol lines to the original stdout (see `protocol_stdout`).
struct Out(File);

impl Out {
    fn send(&mut self, v: serde_json::Value) {
        // A closed pipe leaves nobody to tell: exit quietly then.
        if writeln!(self.0, "{v}")
            .and_then(|_| self.0.flush())
            .is_err()
        {
            std::process::exit(1);
        }
    }

    fn fail(&mut self, message: String) -> ExitCode {
        eprintln!("cuzk-supraseal-bench: {message}");
        self.send(json!({"event": "error", "message": message}));
        ExitCode::from(1)
    }
}

/// Takes fd 1 for the protocol and points fd 1 at stderr, so that printf/std::cout from
/// the C++/CUDA side (or any library) cannot interleave with protocol lines.
fn protocol_stdout() -> File {
    // SAFETY: plain fd duplication at start-up, before any other thread exists; the new
    // fd is owned by the returned File alone.
    unsafe {
        let fd: RawFd = libc::dup(1);
        if fd < 0 {
            // Could not duplicate: keep writing to fd 1 itself.
            return File::from_raw_fd(1);
        }
        libc::dup2(2, 1);
        File::from_raw_fd(fd)
    }
}

fn ms(t: Instant) -> f64 {
    (t.elapsed().as_secs_f64() * 1e3 * 1000.0).round() / 1000.0
}

fn parse_scalar(hex_str: &str, what: &str) -> Result<Scalar, String> {
    let bytes = hex::decode(hex_str).map_err(|e| format!("{what}: bad hex: {e}"))?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|b: Vec<u8>| format!("{what}: {} bytes, expected 32", b.len()))?;
    Option::from(Scalar::from_bytes_le(&bytes))
        .ok_or_else(|| format!("{what}: not a canonical scalar (>= r)"))
}

/// Runs `f`, turning a panic (bellperson/supraseal-c2 panic on CUDA errors) into an error.
fn catching<T>(what: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(format!("{what}: panicked: {msg}"))
        }
    }
}

struct Prover {
    circuit: SyntheticCircuit,
    params: SuprasealParameters<Bls12>,
    pvk: Option<PreparedVerifyingKey<Bls12>>,
}

struct ProofRun {
    ms: f64,
    synth_ms: f64,
    c2_ms: f64,
    c2_identical: bool,
    proof_hex: String,
    verified: Option<bool>,
}

impl Prover {
    /// One timed proof with bellperson's SupraSeal `create_proof_batch` (what
    /// `create_proof` calls; `create_proof` itself carries an unused generic), then an
    /// untimed-for-`ms` separate synthesis, then verification.
    fn prove(&self, r: Scalar, s: Scalar) -> Result<ProofRun, String> {
        let t = Instant::now();
        let proofs = catching("supraseal create_proof", || {
            create_proof_batch(vec![self.circuit], &self.params, vec![r], vec![s])
                .map_err(|e| format!("supraseal create_proof: {e}"))
        })?;
        let ms_total = ms(t);
        let proof = proofs
            .into_iter()
            .next()
            .ok_or("supraseal create_proof returned no proof")?;

        let t = Instant::now();
        let asg = cuzk_groth16::synthesize(self.circuit).map_err(|e| format!("synthesis: {e}"))?;
        let synth_ms = ms(t);
        let inputs = asg.input_assignment[1..].to_vec();

        // SupraSeal's C2 alone on that assignment: what create_proof_batch calls after its
        // own synthesis, timed without it.
        let t = Instant::now();
        let c2_proof = self.c2(&asg, r, s)?;
        let c2_ms = ms(t);

        let mut bytes = Vec::with_capacity(192);
        proof
            .write(&mut bytes)
            .map_err(|e| format!("proof encoding: {e}"))?;
        let mut c2_bytes = Vec::with_capacity(192);
        c2_proof
            .write(&mut c2_bytes)
            .map_err(|e| format!("proof encoding: {e}"))?;
        let verified = match &self.pvk {
            Some(pvk) => {
                Some(verify_proof(pvk, &proof, &inputs).map_err(|e| format!("verification: {e}"))?)
            }
            None => None,
        };
        Ok(ProofRun {
            ms: ms_total,
            synth_ms,
            c2_ms,
            c2_identical: c2_bytes == bytes,
            proof_hex: hex::encode(bytes),
            verified,
        })
    }
}

impl Prover {
    /// SupraSeal's C2 (`supraseal_c2::generate_groth16_proofs`, on the SRS bellperson
    /// loaded) for an assignment synthesized by cuzk: a, b, c with the `input · 0 = 0` rows,
    /// the variables and the three density bitmaps, as bellperson hands them over.
    fn c2(
        &self,
        asg: &cuzk_groth16::Assignment,
        r: Scalar,
        s: Scalar,
    ) -> Result<Proof<Bls12>, String> {
        let params = &self.params;
        let srs = ParameterSource::<Bls12>::get_supraseal_srs(&params)
            .ok_or("SupraSeal SRS not allocated")?;
        let density = |d: &cuzk_groth16::Density| {
            (d.words().as_ptr() as *const usize, d.len(), d.count_ones())
        };
        let (a_d, a_len, a_pop) = density(&asg.a_aux_density);
        let (bi_d, bi_len, bi_pop) = density(&asg.b_input_density);
        let (bx_d, bx_len, bx_pop) = density(&asg.b_aux_density);
        let c2_asg = supraseal_c2::Assignment::<Scalar> {
            a_aux_density: a_d,
            a_aux_bit_len: a_len,
            a_aux_popcount: a_pop,
            b_inp_density: bi_d,
            b_inp_bit_len: bi_len,
            b_inp_popcount: bi_pop,
            b_aux_density: bx_d,
            b_aux_bit_len: bx_len,
            b_aux_popcount: bx_pop,
            a: asg.a().as_ptr(),
            b: asg.b().as_ptr(),
            c: asg.c().as_ptr(),
            abc_size: asg.a().len(),
            inp_assignment_data: asg.input_assignment.as_ptr(),
            inp_assignment_size: asg.input_assignment.len(),
            aux_assignment_data: asg.aux_assignment.as_ptr(),
            aux_assignment_size: asg.aux_assignment.len(),
        };
        if asg.b().len() != asg.a().len() || asg.c().len() != asg.a().len() {
            return Err("a, b, c of different lengths".into());
        }
        let mut proofs = vec![Proof::<Bls12> {
            a: Default::default(),
            b: Default::default(),
            c: Default::default(),
        }];
        catching("supraseal generate_groth16_proofs", || {
            supraseal_c2::generate_groth16_proofs(&[c2_asg], &[r], &[s], &mut proofs, srs);
            Ok(())
        })?;
        proofs.pop().ok_or_else(|| "no proof".into())
    }

    /// K copies of the circuit in one `create_proof_batch` call, as an operator proves the
    /// partitions of one sector (bellperson synthesizes them in parallel, then C2 proves
    /// the batch): wall time, and every proof verified outside it.
    fn prove_batch(&self, k: usize) -> Result<(f64, usize), String> {
        let rs: Vec<Scalar> = (0..k).map(|i| Scalar::from(i as u64 + 7)).collect();
        let t = Instant::now();
        let proofs = catching("supraseal create_proof_batch", || {
            create_proof_batch(vec![self.circuit; k], &self.params, rs.clone(), rs.clone())
                .map_err(|e| format!("supraseal create_proof_batch: {e}"))
        })?;
        let ms_total = ms(t);
        if proofs.len() != k {
            return Err(format!("{} proofs for a batch of {k}", proofs.len()));
        }
        let mut verified = 0;
        if let Some(pvk) = &self.pvk {
            let inputs = synthesize(self.circuit)
                .map_err(|e| format!("synthesis: {e}"))?
                .inputs;
            for p in &proofs {
                if verify_proof(pvk, p, &inputs).map_err(|e| format!("verification: {e}"))? {
                    verified += 1;
                }
            }
        }
        Ok((ms_total, verified))
    }
}

fn main() -> ExitCode {
    let mut out = Out(protocol_stdout());
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match parse_args(&args) {
        Ok(o) => o,
        Err(e) if e.is_empty() => {
            eprintln!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("{USAGE}");
            return out.fail(format!("arguments: {e}"));
        }
    };
    let circuit = match circuit(&opts) {
        Ok(c) => c,
        Err(e) => return out.fail(e),
    };
    // Checked here for a clear message: SupraSeal checks for a GPU before it opens the file.
    if let Err(e) = std::fs::metadata(&opts.params) {
        return out.fail(format!("params file {}: {e}", opts.params.display()));
    }

    // SupraSeal's C2 only assert()s that the parameters fit the circuit (an abort with
    // no message on the protocol): check the point counts here first.
    let file_counts = match params_counts(&opts.params) {
        Ok(c) => c,
        Err(e) => {
            return out.fail(format!(
                "{} is not a bellperson parameters file: {e}",
                opts.params.display()
            ))
        }
    };
    let circuit_counts = match synthesize(circuit) {
        Ok(s) => s.counts,
        Err(e) => return out.fail(format!("synthesis: {e}")),
    };
    if file_counts != circuit_counts {
        return out.fail(format!(
            "{} does not belong to this circuit: points (ic, l, a, b_g1) = {file_counts:?}, \
             the circuit needs {circuit_counts:?}; give the --log-n/--seed/shape flags that \
             `cuzk gen params` was given",
            opts.params.display()
        ));
    }

    let pvk = if opts.verify {
        let vk = File::open(&opts.params)
            .map_err(|e| e.to_string())
            .and_then(|f| {
                VerifyingKey::<Bls12>::read(BufReader::new(f)).map_err(|e| e.to_string())
            });
        match vk {
            Ok(vk) => Some(prepare_verifying_key(&vk)),
            Err(e) => {
                return out.fail(format!(
                    "reading the verifying key from {}: {e}",
                    opts.params.display()
                ))
            }
        }
    } else {
        None
    };

    // SuprasealParameters::new maps the file, allocates pinned host memory and returns;
    // a background thread keeps decoding the points, and the first proof waits for it.
    let t = Instant::now();
    let params = match catching("SuprasealParameters::new", || {
        SuprasealParameters::<Bls12>::new(opts.params.clone()).map_err(|e| e.to_string())
    }) {
        Ok(p) => p,
        Err(e) => {
            return out.fail(format!(
                "SupraSeal could not load {}: {e}",
                opts.params.display()
            ))
        }
    };
    let load_ms = ms(t);
    let prover = Prover {
        circuit,
        params,
        pvk,
    };

    // Warm-up: waits for the point decoding, creates the CUDA context and SupraSeal's
    // device buffers, so that every timed proof below is a steady-state one.
    let mut warmup_ms = serde_json::Value::Null;
    if opts.warmup {
        let t = Instant::now();
        match prover.prove(Scalar::ZERO, Scalar::ZERO) {
            Ok(run) if run.verified == Some(false) => {
                return out.fail(
                    "warm-up proof does not verify: do the parameters belong to this circuit \
                     (--log-n/--seed/shape flags as given to `cuzk gen params`)?"
                        .into(),
                )
            }
            Ok(_) => warmup_ms = json!(ms(t)),
            Err(e) => return out.fail(format!("warm-up proof: {e}")),
        }
    }
    out.send(json!({
        "event": "ready",
        "load_ms": load_ms,
        "warmup_ms": warmup_ms,
        "log_n": opts.log_n,
        "n_constraints": circuit.n_constraints,
        "n_inputs": circuit.n_inputs,
        "seed": circuit.seed,
        "witness_seed": circuit.witness_seed,
        "prover": "supraseal-c2",
    }));

    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let line = match line {
            Ok(l) => l,
            Err(e) => return out.fail(format!("reading stdin: {e}")),
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [] => continue,
            ["quit"] => return ExitCode::SUCCESS,
            ["prove", r_hex, s_hex] => {
                let rs = parse_scalar(r_hex, "r").and_then(|r| Ok((r, parse_scalar(s_hex, "s")?)));
                let (r, s) = match rs {
                    Ok(rs) => rs,
                    Err(e) => return out.fail(e),
                };
                match prover.prove(r, s) {
                    Ok(run) => out.send(json!({
                        "event": "proof",
                        "ms": run.ms,
                        "synth_ms": run.synth_ms,
                        "c2_ms": run.c2_ms,
                        "c2_identical": run.c2_identical,
                        "proof_hex": run.proof_hex,
                        "verified": run.verified,
                    })),
                    Err(e) => return out.fail(e),
                }
            }
            ["batch", k] => {
                let k = match k.parse::<usize>() {
                    Ok(k) if k > 0 => k,
                    _ => return out.fail(format!("batch: {k:?} is not a positive count")),
                };
                match prover.prove_batch(k) {
                    Ok((ms_total, verified)) => out.send(json!({
                        "event": "batch",
                        "proofs": k,
                        "ms": ms_total,
                        "ms_per_proof": ms_total / k as f64,
                        "verified": verified,
                    })),
                    Err(e) => return out.fail(e),
                }
            }
            _ => {
                return out.fail(format!(
                    "unknown command {line:?} (expected `prove R_HEX S_HEX`, `batch K` or `quit`)"
                ))
            }
        }
    }
    // End of input without `quit`: the driver went away; nothing left to do.
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests;
