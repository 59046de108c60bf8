use skel::prelude::*;

#[userfn]
fn f(a: f32) -> f32 {
    let g = |x: f32| x * 2.0;
    g(a)
}

fn main() {}
