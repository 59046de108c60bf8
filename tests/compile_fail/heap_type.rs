use skel::prelude::*;

#[userfn]
fn f(a: f32) -> f32 {
    let v: Vec<f32> = Vec::new();
    a
}

fn main() {}
