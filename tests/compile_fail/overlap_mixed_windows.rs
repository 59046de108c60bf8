use skel::prelude::*;

#[userfn]
fn mixed(a: Window<f32>, b: Window2<f32>) -> f32 {
    a[0] + b[(0, 0)]
}

fn main() {}
