use skel::prelude::*;

#[userfn]
fn f(a: f32) -> f32 {
    let mut x = a;
    loop {
        x *= 0.5;
        if x < 1.0 {
            break x;
        }
    }
}

fn main() {}
