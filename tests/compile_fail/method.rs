use skel::prelude::*;

#[userfn]
fn f(a: f32) -> f32 {
    a.to_degrees()
}

fn main() {}
