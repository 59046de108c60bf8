use skel::prelude::*;

#[userfn]
fn f(a: f32) {
    let _b = a;
}

fn main() {}
