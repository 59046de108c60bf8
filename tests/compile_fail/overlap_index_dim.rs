use skel::prelude::*;

#[userfn]
fn at(#[index] i: usize, w: Window2<f32>) -> f32 {
    w[(0, 0)] + i as f32
}

fn main() {}
