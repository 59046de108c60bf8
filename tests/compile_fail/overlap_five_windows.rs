use skel::prelude::*;

#[userfn]
fn five(a: Window2<f32>, b: Window2<f32>, c: Window2<f32>, d: Window2<f32>, e: Window2<f32>) -> f32 {
    a[(0, 0)] + b[(0, 0)] + c[(0, 0)] + d[(0, 0)] + e[(0, 0)]
}

fn main() {}
