//! SkePU's `coulombic`: the electrostatic potential of a set of charged atoms on one plane of
//! a grid. An index Map over the grid that reads every atom (MapArray, 2D index).
//!
//! `cargo run --example skepu_coulombic -- --backend rayon --size 64`

use skel::prelude::*;

mod common;

/// A point charge.
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
pub struct Atom {
    pub x: f32,
    pub y: f32,
    pub z: f32,
    pub q: f32,
}

/// Grid spacing.
pub const SPACING: f32 = 0.1;
/// Height of the plane the potential is computed on.
pub const PLANE_Z: f32 = 0.5;

#[userfn]
fn potential(
    #[index] (row, col): (usize, usize),
    atoms: &[Atom],
    #[uniform] count: u32,
    #[uniform] spacing: f32,
    #[uniform] z: f32,
) -> f32 {
    let (px, py) = (col as f32 * spacing, row as f32 * spacing);
    let mut e = 0.0f32;
    // `count` is `atoms.len()`: the GPU MapArray kernels do not pass array lengths yet.
    for a in 0..count as usize {
        let (dx, dy, dz) = (atoms[a].x - px, atoms[a].y - py, atoms[a].z - z);
        e += atoms[a].q / (dx * dx + dy * dy + dz * dz).sqrt();
    }
    e
}

/// The potential on an `n x n` grid on `backend`.
pub fn compute(backend: Backend, atoms: &[Atom], n: usize) -> skel::Result<Matrix<f32>> {
    let atoms = Vector::from(atoms.to_vec());
    let mut grid = Matrix::zeroed(n, n);
    MapArray::new(potential)
        .uniforms((atoms.len() as u32, SPACING, PLANE_Z))
        .backend(backend)
        .run_index(&atoms, &mut grid)?;
    Ok(grid)
}

/// The same in plain Rust: the atoms summed in order at every grid point.
pub fn reference(atoms: &[Atom], n: usize) -> Matrix<f32> {
    Matrix::from_fn(n, n, |r, c| {
        let p = [c as f32 * SPACING, r as f32 * SPACING, PLANE_Z];
        atoms.iter().fold(0.0f32, |e, a| {
            let d = [a.x - p[0], a.y - p[1], a.z - p[2]];
            e + a.q / (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt()
        })
    })
}

/// `count` atoms spread over the grid's box, away from its plane, charges in `[-1, 1)`.
pub fn inputs(count: usize, n: usize) -> Vec<Atom> {
    let r = common::data(4 * count, 8);
    let side = n as f32 * SPACING;
    let atom = |k: usize| Atom {
        x: r[4 * k] * side,
        y: r[4 * k + 1] * side,
        z: if k % 2 == 0 { 0.0 } else { 1.0 } + 0.2 * r[4 * k + 2],
        q: 2.0 * r[4 * k + 3] - 1.0,
    };
    (0..count).map(atom).collect()
}

fn main() -> std::process::ExitCode {
    common::main("skepu_coulombic", 64, |backend, n| {
        let atoms = inputs(100, n);
        let (got, want) = (compute(backend, &atoms, n)?, reference(&atoms, n));
        let max = got.as_slice().iter().fold(f32::MIN, |m, &e| m.max(e));
        Ok((
            format!("{n}x{n} grid, 100 atoms, largest potential {max}"),
            got == want,
        ))
    })
}
