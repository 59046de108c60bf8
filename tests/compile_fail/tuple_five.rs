use skel::prelude::*;

#[userfn]
fn f(a: f32) -> (f32, f32, f32, f32, f32) {
    (a, a, a, a, a)
}

fn main() {}
