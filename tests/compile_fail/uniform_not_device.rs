use skel::prelude::*;

#[userfn]
fn f(x: f32, #[uniform] scale: isize) -> f32 {
    x * scale as f32
}

fn main() {
    let x = Vector::from(vec![1.0f32]);
    let mut out = Vector::zeroed(1);
    Map::new(f).uniforms((2,)).run(&x, &mut out).unwrap();
}
