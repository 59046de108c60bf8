use skel::prelude::*;

#[userfn]
fn f(a: f32) -> f32 {
    let r = &a;
    *r
}

fn main() {}
