use skel::prelude::*;

fn twice(x: f32) -> f32 {
    2.0 * x
}

#[userfn]
fn f(a: f32) -> f32 {
    twice(a) + 1.0
}

fn main() {
    let x = Vector::from(vec![1.0f32]);
    let mut out = Vector::zeroed(1);
    Map::new(f).run(&x, &mut out).unwrap();
}
