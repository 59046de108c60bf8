//! The language fixes of issue 27 on every backend against the `cpu` oracle and plain
//! Rust: `usize` uniforms, a user struct named `Cell` (a name std also uses), results
//! without `Default` (`[u32; 64]`, a struct holding one) through `with_start`, and a
//! local named like a user function.

use skel::prelude::*;

use super::available;

const BACKENDS: [Backend; 4] = [Backend::Cpu, Backend::Rayon, Backend::OpenCl, Backend::Cuda];

fn backends() -> impl Iterator<Item = Backend> {
    BACKENDS.into_iter().filter(|&b| available(b))
}

/// `#[index]` is a `usize`, and so may a uniform be.
#[userfn]
pub fn wrap_at(#[index] i: usize, x: u32, #[uniform] n: usize, #[uniform] k: u32) -> u32 {
    x + ((i % n) as u32) * k
}

/// Named like `std::cell::Cell`, but a plain device struct.
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
pub struct Cell {
    pub alive: u32,
    pub age: u32,
}

#[userfn]
pub fn step_cell(c: Cell) -> Cell {
    if c.alive == 1 {
        Cell {
            alive: 1,
            age: c.age + 1,
        }
    } else {
        Cell { alive: 0, age: 0 }
    }
}

/// 64 bins: more than `Default` covers for arrays.
#[userfn]
pub fn one_hot(x: u32) -> [u32; 64] {
    let mut m = [0u32; 64];
    m[(x % 64) as usize] = 1;
    m
}

#[userfn]
pub fn add64(a: [u32; 64], b: [u32; 64]) -> [u32; 64] {
    let mut c = a;
    for k in 0..64 {
        c[k] = a[k] + b[k];
    }
    c
}

#[test]
fn usize_uniforms() {
    for b in backends() {
        for n in [0usize, 1, 7, 1009] {
            let x = Vector::from_fn(n, |i| i as u32);
            let mut out = Vector::zeroed(n);
            Map::new(wrap_at)
                .uniforms((5usize, 3))
                .backend(b)
                .run(&x, &mut out)
                .unwrap();
            let want: Vec<u32> = (0..n).map(|i| i as u32 + (i % 5) as u32 * 3).collect();
            assert_eq!(out.to_vec(), want, "{b} n={n}");
        }
    }
}

#[test]
fn a_struct_named_cell() {
    for b in backends() {
        let cells = Vector::from_fn(13, |i| Cell {
            alive: (i % 2) as u32,
            age: i as u32,
        });
        let mut out = Vector::zeroed(13);
        Map::new(step_cell)
            .backend(b)
            .run(&cells, &mut out)
            .unwrap();
        let want: Vec<Cell> = (0..13).map(|i| step_cell::call(cells[i])).collect();
        assert_eq!(out.to_vec(), want, "{b}");
    }
}

#[test]
fn results_without_default() {
    for b in backends() {
        for n in [0usize, 1, 64, 1009] {
            let x = Vector::from_fn(n, |i| (i * 7) as u32);
            let got = MapReduce::with_start(one_hot, add64, [0; 64])
                .backend(b)
                .run(&x)
                .unwrap();
            let mut want = [0u32; 64];
            for i in 0..n {
                want[(i * 7) % 64] += 1;
            }
            assert_eq!(got, want, "{b} n={n}");
            let mut hots = Vector::filled(n, [0u32; 64]);
            Map::new(one_hot).backend(b).run(&x, &mut hots).unwrap();
            let folded = Reduce::with_start(add64, [0; 64])
                .backend(b)
                .run(&hots)
                .unwrap();
            assert_eq!(folded, want, "{b} n={n}");
        }
    }
}
