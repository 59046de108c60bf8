use skel::prelude::*;

#[userfn]
fn f(a: f32) -> f32 {
    unsafe { a }
}

fn main() {}
