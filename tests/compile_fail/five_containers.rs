use skel::prelude::*;

#[userfn]
fn f(a: &[f32], b: &[f32], c: &[f32], d: &[f32], e: Mat<f32>, x: f32) -> f32 {
    a[0] + b[0] + c[0] + d[0] + e[(0, 0)] + x
}

fn main() {}
