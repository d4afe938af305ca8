use super::*;

/// Every row satisfies a·b = c, the densities land near the shape's, and the witness
/// has mostly bit values.
#[test]
fn satisfiable_with_porep_densities() {
    let c = SyntheticCircuit::with_log_n(14, 3, SyntheticShape::default()).expect("valid size");
    let asg = crate::synthesize(c).expect("synthesizes");
    assert_eq!(asg.n_rows(), 1 << 14);
    assert_eq!(asg.input_assignment.len(), c.n_inputs);
    assert_eq!(c.n_inputs, 16);
    for (j, ((a, b), cc)) in asg.a().iter().zip(asg.b()).zip(asg.c()).enumerate() {
        assert_eq!(a * b, *cc, "row {j} unsatisfied");
    }
    let n_aux = asg.aux_assignment.len() as f64;
    let a_frac = asg.a_aux_density.count_ones() as f64 / n_aux;
    let b_frac = asg.b_aux_density.count_ones() as f64 / n_aux;
    let bits = asg
        .aux_assignment
        .iter()
        .filter(|v| **v == Scalar::ZERO || **v == Scalar::ONE)
        .count();
    let bit_frac = bits as f64 / n_aux;
    assert!((a_frac - 0.997).abs() < 0.002, "A density {a_frac}");
    assert!((b_frac - 0.25).abs() < 0.02, "B density {b_frac}");
    assert!((bit_frac - 0.9).abs() < 0.02, "bit fraction {bit_frac}");
    assert_eq!(asg.b_input_density.count_ones(), 1, "only ONE in B");
    assert!(asg.b_input_density.get(0));
}

#[test]
fn shape_is_configurable() {
    let shape = SyntheticShape {
        a_aux_fraction: 0.9,
        b_aux_fraction: 0.5,
        b_input_fraction: 0.5,
        bit_fraction: 0.5,
        n_inputs: Some(20),
        parts: 1,
    };
    let c = SyntheticCircuit::with_log_n(13, 4, shape).expect("valid size");
    let asg = crate::synthesize(c).expect("synthesizes");
    for (j, ((a, b), cc)) in asg.a().iter().zip(asg.b()).zip(asg.c()).enumerate() {
        assert_eq!(a * b, *cc, "row {j} unsatisfied");
    }
    let n_aux = asg.aux_assignment.len() as f64;
    let a_frac = asg.a_aux_density.count_ones() as f64 / n_aux;
    let b_frac = asg.b_aux_density.count_ones() as f64 / n_aux;
    assert!((a_frac - 0.9).abs() < 0.02, "A density {a_frac}");
    assert!((b_frac - 0.5).abs() < 0.03, "B density {b_frac}");
    assert_eq!(
        asg.b_input_density.count_ones(),
        10,
        "half the 20 inputs in B"
    );
}

#[test]
fn deterministic_in_the_seed() {
    let make = |seed| {
        let c =
            SyntheticCircuit::with_log_n(10, seed, SyntheticShape::default()).expect("valid size");
        crate::synthesize(c).expect("synthesizes")
    };
    let (a, b, other) = (make(1), make(1), make(2));
    assert_eq!(a.aux_assignment, b.aux_assignment);
    assert_eq!(a.abc, b.abc);
    assert_ne!(a.aux_assignment, other.aux_assignment);
}

/// Another witness seed changes the values but not the structure: the densities match
/// and every row still holds.
#[test]
fn witness_seed_keeps_the_structure() {
    let c = SyntheticCircuit::with_log_n(10, 5, SyntheticShape::default()).expect("valid size");
    let a = crate::synthesize(c).expect("synthesizes");
    let b = crate::synthesize(c.with_witness_seed(6)).expect("synthesizes");
    assert_ne!(a.aux_assignment, b.aux_assignment);
    assert_eq!(a.a_aux_density, b.a_aux_density);
    assert_eq!(a.b_aux_density, b.b_aux_density);
    assert_eq!(a.b_input_density, b.b_input_density);
    for (j, ((x, y), z)) in b.a().iter().zip(b.b()).zip(b.c()).enumerate() {
        assert_eq!(x * y, *z, "row {j} unsatisfied");
    }
}

/// FNV-1a over a, b, c, the inputs and the aux values.
fn digest(asg: &crate::Assignment) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let values = asg.a().iter().chain(asg.b()).chain(asg.c());
    for v in values
        .chain(&asg.input_assignment)
        .chain(&asg.aux_assignment)
    {
        for byte in v.to_bytes_le() {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// One part (the default) is exactly the circuit every earlier parameters file and
/// the SupraSeal baseline were made for: digests taken from the code before parts.
#[test]
fn one_part_is_the_sequential_circuit_of_before() {
    for (lg, seed, w, want) in [
        (10u32, 7u64, 9u64, 0x4a8e_cdcb_5385_642c_u64),
        (12, 1, 1, 0x1874_388c_65cd_8b16),
    ] {
        let c = SyntheticCircuit::with_log_n(lg, seed, SyntheticShape::default())
            .expect("valid size")
            .with_witness_seed(w);
        assert_eq!(c.n_parts(), 0, "a sequential circuit has no parts");
        let asg = crate::synthesize(c).expect("synthesizes");
        assert_eq!(digest(&asg), want, "2^{lg}, seed {seed}, witness {w}");
    }
}

fn parted(lg: u32, parts: usize) -> SyntheticCircuit {
    let shape = SyntheticShape {
        parts,
        ..SyntheticShape::default()
    };
    SyntheticCircuit::with_log_n(lg, 3, shape).expect("valid size")
}

/// Given as parts, the circuit still fills its domain, every row holds, its densities
/// stay near the shape's, and the layout found from one part is the prefix of
/// [`PREFIX`] constraints plus the rest, then equal parts. See: #17.
#[test]
fn parts_keep_the_shape_and_split_evenly() {
    use crate::sublayout::SubLayout;
    use crate::witness::Counts;
    let c = parted(14, 18);
    assert_eq!(c.n_parts(), 18);
    let asg = crate::synthesize(c).expect("synthesizes");
    assert_eq!(asg.n_rows(), 1 << 14);
    for (j, ((a, b), cc)) in asg.a().iter().zip(asg.b()).zip(asg.c()).enumerate() {
        assert_eq!(a * b, *cc, "row {j} unsatisfied");
    }
    let n_aux = asg.aux_assignment.len() as f64;
    let a_frac = asg.a_aux_density.count_ones() as f64 / n_aux;
    let b_frac = asg.b_aux_density.count_ones() as f64 / n_aux;
    assert!((a_frac - 0.997).abs() < 0.003, "A density {a_frac}");
    assert!((b_frac - 0.25).abs() < 0.02, "B density {b_frac}");
    let total = Counts {
        inputs: asg.input_assignment.len(),
        aux: asg.aux_assignment.len(),
        constraints: asg.n_rows() - asg.input_assignment.len(),
    };
    let one = crate::sublayout::witness_of_part(&c, 5)
        .expect("part 5")
        .counts();
    let layout = SubLayout::derive(total, one, 18).expect("splits");
    // 16 inputs: ONE, then 15 public ones, none per part (15 / 18), all in the prefix.
    assert_eq!(layout.prefix.inputs, 16);
    assert_eq!(layout.stride.inputs, 0);
    let part_c = (c.n_constraints - PREFIX - 2 * 15) / 18;
    assert_eq!(layout.stride.constraints, part_c);
    assert_eq!(layout.prefix.constraints, c.n_constraints - 18 * part_c);
    let prefix = crate::sublayout::witness_of_prefix(&c)
        .expect("prefix")
        .expect("a circuit of parts has a prefix");
    assert_eq!(prefix.counts(), layout.prefix);
}

/// The witness computed part by part on the rayon pool, then a, b, c from the
/// recording, is plain synthesis's assignment, for several part counts, sizes (inputs
/// in the parts from 2^19 rows up: 327 / 18 = 18 per part at 2^19; here 2^12 with 40
/// inputs) and witnesses. See: #17.
#[test]
fn parts_give_the_plain_assignment() {
    use crate::recorded::R1cs;
    use crate::sublayout::SubLayout;
    for (lg, parts, inputs) in [(10u32, 2usize, None), (12, 3, Some(40)), (12, 18, None)] {
        let shape = SyntheticShape {
            parts,
            n_inputs: inputs,
            b_input_fraction: 0.25,
            ..SyntheticShape::default()
        };
        let c = SyntheticCircuit::with_log_n(lg, 11, shape).expect("valid size");
        let r = R1cs::record(c).expect("records");
        let one = crate::sublayout::witness_of_part(&c, 0)
            .expect("part 0")
            .counts();
        let layout = SubLayout::derive(r.counts(), one, parts).expect("splits");
        for w in [1u64, 2] {
            let inst = c.with_witness_seed(w);
            let want = crate::synthesize(inst).expect("synthesizes");
            let gate = crate::pool_gate::PoolGate::new();
            let got = r.assign_parts(&layout, &inst, &gate).expect("assigns");
            assert_eq!(got, want, "2^{lg}, {parts} parts, witness {w}");
        }
    }
}

#[test]
fn bad_shapes_are_refused() {
    let bad = SyntheticShape {
        b_aux_fraction: 1.5,
        ..SyntheticShape::default()
    };
    assert!(matches!(
        SyntheticCircuit::new(1000, 0, bad),
        Err(SyntheticError::BadFraction {
            name: "b_aux_fraction",
            ..
        })
    ));
    let many = SyntheticShape {
        n_inputs: Some(600),
        ..SyntheticShape::default()
    };
    assert!(matches!(
        SyntheticCircuit::new(1000, 0, many),
        Err(SyntheticError::TooSmall { .. })
    ));
    assert!(matches!(
        SyntheticCircuit::with_log_n(2, 0, SyntheticShape::default()),
        Err(SyntheticError::BadLogN { lg: 2 })
    ));
    let parts = |parts| SyntheticShape {
        parts,
        ..SyntheticShape::default()
    };
    assert!(matches!(
        SyntheticCircuit::with_log_n(10, 0, parts(0)),
        Err(SyntheticError::NoParts)
    ));
    // 2^8 rows cannot hold a prefix of 256 constraints and 18 parts.
    assert!(matches!(
        SyntheticCircuit::with_log_n(8, 0, parts(18)),
        Err(SyntheticError::TooSmall { .. })
    ));
    let c = SyntheticCircuit::with_log_n(10, 0, parts(4)).expect("valid");
    let err = c.part(4).expect_err("parts 0..4");
    assert!(err.to_string().contains("of 4 parts"), "{err}");
}
