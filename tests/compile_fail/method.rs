use skel::prelude::*;

#[userfn]
fn f(a: f32) -> f32 {
    a.atan2(1.0)
}

fn main() {}
