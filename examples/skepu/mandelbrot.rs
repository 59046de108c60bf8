//! SkePU's `mandelbrot`: an index Map over a matrix, one escape-time iteration per pixel.
//!
//! `cargo run --example skepu_mandelbrot -- --backend rayon --size 64`

use skel::prelude::*;

mod common;

/// Iterations after which a point counts as inside the set.
pub const MAX_ITERS: u32 = 256;

#[userfn]
fn escape_time(
    #[index] (row, col): (usize, usize),
    #[uniform] height: u32,
    #[uniform] width: u32,
) -> u32 {
    // The view spans re in [-2, 1), im in [-1, 1).
    let cx = col as f32 * (3.0 / width as f32) - 2.0;
    let cy = row as f32 * (2.0 / height as f32) - 1.0;
    let mut x = 0.0f32;
    let mut y = 0.0f32;
    let mut iters = 0u32;
    while iters < MAX_ITERS && x * x + y * y <= 4.0 {
        let next_x = x * x - y * y + cx;
        y = 2.0 * x * y + cy;
        x = next_x;
        iters += 1;
    }
    iters
}

/// The escape times of an `height x width` picture of the set on `backend`.
pub fn compute(backend: Backend, height: usize, width: usize) -> skel::Result<Matrix<u32>> {
    let mut picture = Matrix::zeroed(height, width);
    Map::new(escape_time)
        .uniforms((height as u32, width as u32))
        .backend(backend)
        .run_index(&mut picture)?;
    Ok(picture)
}

/// The same in plain Rust, with the point as a pair of reals.
pub fn reference(height: usize, width: usize) -> Matrix<u32> {
    Matrix::from_fn(height, width, |r, c| {
        let point = (
            c as f32 * (3.0 / width as f32) - 2.0,
            r as f32 * (2.0 / height as f32) - 1.0,
        );
        let mut z = (0.0f32, 0.0f32);
        (0..MAX_ITERS)
            .find(|_| {
                let escaped = z.0 * z.0 + z.1 * z.1 > 4.0;
                z = (z.0 * z.0 - z.1 * z.1 + point.0, 2.0 * z.0 * z.1 + point.1);
                escaped
            })
            .unwrap_or(MAX_ITERS)
    })
}

fn main() -> std::process::ExitCode {
    common::main("skepu_mandelbrot", 64, |backend, n| {
        let (got, want) = (compute(backend, n, 2 * n)?, reference(n, 2 * n));
        let mut art = String::new();
        for r in (0..n).step_by((n / 16).max(1)) {
            let row = (0..2 * n).step_by((n / 16).max(1));
            art.extend(row.map(|c| if got[(r, c)] == MAX_ITERS { '#' } else { '.' }));
            art.push('\n');
        }
        let inside = got.as_slice().iter().filter(|&&i| i == MAX_ITERS).count();
        Ok((
            format!("{art}{inside} of {} points inside", 2 * n * n),
            got == want,
        ))
    })
}
