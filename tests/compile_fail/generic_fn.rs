use skel::prelude::*;

#[userfn]
fn f<T: Copy>(a: T) -> T {
    a
}

fn main() {}
