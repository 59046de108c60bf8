use skel::prelude::*;

#[userfn]
fn f(a: f32) -> f32 {
    let mut x = a;
    let y = loop {
        x *= 0.5;
        if x < 1.0 {
            break x;
        }
    };
    y
}

fn main() {}
