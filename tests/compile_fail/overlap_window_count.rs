use skel::prelude::*;

#[userfn]
fn curl(e: Window2<f32>, h: Window2<f32>) -> f32 {
    e[(0, 1)] - e[(0, 0)] + h[(1, 0)] - h[(0, 0)]
}

fn main() {
    let ex = Matrix::<f32>::zeroed(4, 4);
    let mut out = Matrix::<f32>::zeroed(4, 4);
    // Two windowed inputs, one given.
    let _ = MapOverlap::new(curl, (1, 1)).run(&ex, &mut out);
}
