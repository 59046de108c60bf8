use skel::prelude::*;

#[userfn]
fn mv(#[index] i: usize, m: Mat<f32>, x: &[f32]) -> f32 {
    let mut s = 0.0;
    for j in 0..m.cols() {
        s += m[(i, j)] * x[j];
    }
    s
}

fn main() {
    let a = Matrix::from_fn(2, 2, |r, c| (r + c) as f32);
    let mut y = Vector::zeroed(2);
    // The containers are not bound: `.arrays((&a, &x))` is missing.
    let _ = Map::new(mv).run_index(&mut y);
    // One container bound for two parameters.
    let _ = Map::new(mv).arrays((&a,)).run_index(&mut y);
}
