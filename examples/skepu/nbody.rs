//! SkePU's `nbody`: one time step of a gravitational n-body simulation. Every particle reads
//! all the others (MapArray with the particles as the shared array).
//!
//! `cargo run --example skepu_nbody -- --backend rayon --size 1000`

use skel::prelude::*;

mod common;

/// One body: position, velocity, mass.
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
pub struct Particle {
    pub x: f32,
    pub y: f32,
    pub z: f32,
    pub vx: f32,
    pub vy: f32,
    pub vz: f32,
    pub m: f32,
}

/// Gravitational constant, in the simulation's units.
pub const G: f32 = 1.0;
/// Time step.
pub const DT: f32 = 0.01;
/// Softening, so close encounters stay finite.
pub const EPS2: f32 = 1e-3;

#[userfn]
fn step(
    #[index] i: usize,
    ps: &[Particle],
    #[uniform] count: u32,
    #[uniform] g: f32,
    #[uniform] dt: f32,
) -> Particle {
    let p = ps[i];
    let (mut ax, mut ay, mut az) = (0.0f32, 0.0f32, 0.0f32);
    // `count` is `ps.len()`: the GPU MapArray kernels do not pass array lengths yet.
    for j in 0..count as usize {
        if j != i {
            let q = ps[j];
            let (dx, dy, dz) = (q.x - p.x, q.y - p.y, q.z - p.z);
            let inv = 1.0 / (dx * dx + dy * dy + dz * dz + EPS2).sqrt();
            let s = g * q.m * inv * inv * inv;
            ax += s * dx;
            ay += s * dy;
            az += s * dz;
        }
    }
    let (vx, vy, vz) = (p.vx + ax * dt, p.vy + ay * dt, p.vz + az * dt);
    Particle {
        x: p.x + vx * dt,
        y: p.y + vy * dt,
        z: p.z + vz * dt,
        vx,
        vy,
        vz,
        m: p.m,
    }
}

/// The particles after one step on `backend`.
pub fn compute(backend: Backend, ps: &[Particle]) -> skel::Result<Vec<Particle>> {
    let ps = Vector::from(ps.to_vec());
    let mut next = Vector::zeroed(ps.len());
    MapArray::new(step)
        .uniforms((ps.len() as u32, G, DT))
        .backend(backend)
        .run_index(&ps, &mut next)?;
    Ok(next.to_vec())
}

/// The same in plain Rust, with the same order of operations.
pub fn reference(ps: &[Particle]) -> Vec<Particle> {
    let mut next = ps.to_vec();
    for (i, n) in next.iter_mut().enumerate() {
        let mut a = [0.0f32; 3];
        for (_, q) in ps.iter().enumerate().filter(|&(j, _)| j != i) {
            let d = [q.x - n.x, q.y - n.y, q.z - n.z];
            let inv = 1.0 / (d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + EPS2).sqrt();
            let s = G * q.m * inv * inv * inv;
            a.iter_mut().zip(d).for_each(|(a, d)| *a += s * d);
        }
        (n.vx, n.vy, n.vz) = (n.vx + a[0] * DT, n.vy + a[1] * DT, n.vz + a[2] * DT);
        (n.x, n.y, n.z) = (n.x + n.vx * DT, n.y + n.vy * DT, n.z + n.vz * DT);
    }
    next
}

/// `n` particles at rest in the unit cube, masses in `[0.5, 1.5)`.
pub fn inputs(n: usize) -> Vec<Particle> {
    let r = common::data(4 * n, 7);
    let p = |k: usize| Particle {
        x: r[4 * k],
        y: r[4 * k + 1],
        z: r[4 * k + 2],
        m: 0.5 + r[4 * k + 3],
        ..Default::default()
    };
    (0..n).map(p).collect()
}

fn main() -> std::process::ExitCode {
    common::main("skepu_nbody", 1000, |backend, n| {
        let ps = inputs(n);
        let (got, want) = (compute(backend, &ps)?, reference(&ps));
        let first = got.first().copied().unwrap_or_default();
        Ok((format!("particle 0 after one step: {first:?}"), got == want))
    })
}
