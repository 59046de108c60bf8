use skel::prelude::*;

#[userfn]
fn scaled(w: Window2<f32>, x: f32) -> f32 {
    w[(0, 0)] * x
}

fn main() {}
