//! SkePU's `game_of_life`: Conway's Game of Life on a torus, one 2D MapOverlap (cyclic edges)
//! per generation.
//!
//! `cargo run --example skepu_life -- --backend rayon --size 64`

use skel::prelude::*;

mod common;

#[userfn]
fn life(w: Window2<u8>) -> u8 {
    let mut neighbours = 0u32;
    for di in -1..=1 {
        for dj in -1..=1 {
            if di != 0 || dj != 0 {
                neighbours += w[(di, dj)] as u32;
            }
        }
    }
    let alive = w[(0, 0)] == 1;
    if neighbours == 3 || (alive && neighbours == 2) {
        1
    } else {
        0
    }
}

/// `board` after `generations` steps on `backend`.
pub fn compute(
    backend: Backend,
    board: &Matrix<u8>,
    generations: usize,
) -> skel::Result<Matrix<u8>> {
    let step = MapOverlap::new(life, (1, 1))
        .edge(Edge::Cyclic)
        .backend(backend);
    let mut current = board.clone();
    let mut next = Matrix::zeroed(board.rows(), board.cols());
    for _ in 0..generations {
        step.run(&current, &mut next)?;
        std::mem::swap(&mut current, &mut next);
    }
    Ok(current)
}

/// The same in plain Rust, wrapping around the edges.
pub fn reference(board: &Matrix<u8>, generations: usize) -> Matrix<u8> {
    let (rows, cols) = (board.rows(), board.cols());
    if board.is_empty() {
        return board.clone();
    }
    let mut b = board.to_vec();
    for _ in 0..generations {
        let next = Matrix::from_fn(rows, cols, |r, c| {
            let around = [
                (rows - 1, cols - 1),
                (rows - 1, 0),
                (rows - 1, 1),
                (0, cols - 1),
                (0, 1),
                (1, cols - 1),
                (1, 0),
                (1, 1),
            ];
            let n: u8 = around
                .iter()
                .map(|&(dr, dc)| b[(r + dr) % rows * cols + (c + dc) % cols])
                .sum();
            u8::from(n == 3 || (b[r * cols + c] == 1 && n == 2))
        });
        b = next.to_vec();
    }
    Matrix::from_vec(rows, cols, b).expect("rows * cols cells")
}

/// An `n x n` board, about a third alive, with a glider in the corner when it fits.
pub fn inputs(n: usize) -> Matrix<u8> {
    let seed = common::data(n * n, 10);
    let mut board = Matrix::from_fn(n, n, |r, c| u8::from(seed[r * n + c] < 0.33));
    let glider = [(0, 1), (1, 2), (2, 0), (2, 1), (2, 2)];
    for (r, c) in glider.into_iter().filter(|_| n >= 3) {
        board[(r, c)] = 1;
    }
    board
}

fn main() -> std::process::ExitCode {
    common::main("skepu_life", 64, |backend, n| {
        let board = inputs(n);
        let (got, want) = (compute(backend, &board, 10)?, reference(&board, 10));
        let count = |m: &Matrix<u8>| m.as_slice().iter().filter(|&&c| c == 1).count();
        Ok((
            format!(
                "alive: {} at start, {} after 10 generations",
                count(&board),
                count(&got)
            ),
            got == want,
        ))
    })
}
