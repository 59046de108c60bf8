use skel::prelude::*;

#[userfn]
fn f(n: u32) -> u32 {
    let mut s = 0;
    'outer: for i in 0..n {
        for j in 0..n {
            if i * j > 10 {
                break 'outer;
            }
            s += j;
        }
    }
    s
}

fn main() {}
