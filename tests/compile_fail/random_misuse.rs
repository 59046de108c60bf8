use skel::prelude::*;

#[userfn]
fn two(x: f32, a: &mut Random, b: &mut Random) -> f32 {
    x + a.next_f32() + b.next_f32()
}

#[userfn]
fn other_method(x: f32, rng: &mut Random) -> f32 {
    x + rng.gen_range(0.0..1.0)
}

#[userfn]
fn passed_on(x: f32, rng: &mut Random) -> f32 {
    let r = rng;
    x + r.next_f32()
}

fn main() {
    let x = Vector::from(vec![1.0f32]);
    let mut out = Vector::zeroed(1);
    Map::new(other_method).run(&x, &mut out).unwrap();
    Map::new(passed_on).run(&x, &mut out).unwrap();
}

#[userfn]
fn noisy3(w: Window3<f32>, rng: &mut Random) -> f32 {
    w[(0, 0, 0)] + rng.next_f32()
}
