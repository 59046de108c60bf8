use skel::prelude::*;

#[userfn]
fn f(#[uniform] u: f32, a: f32) -> f32 {
    a * u
}

fn main() {}
