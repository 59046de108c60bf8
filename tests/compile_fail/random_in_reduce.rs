use skel::prelude::*;

#[userfn]
fn noisy_add(a: f32, b: f32, rng: &mut Random) -> f32 {
    a + b + rng.next_f32()
}

fn main() {
    let x = Vector::from(vec![1.0f32, 2.0]);
    let _ = Reduce::new(noisy_add).run(&x);
}
