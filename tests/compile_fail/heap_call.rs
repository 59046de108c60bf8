use skel::prelude::*;

#[userfn]
fn f(a: f32) -> f32 {
    let s = String::new();
    a
}

fn main() {}
