// A skeleton (or a stream pipeline) built and dropped without running is `unused_must_use`.
#![deny(unused_must_use)]

use skel::prelude::*;
use skel::stream::Pipeline;

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
fn lookup(t: &[f32], x: u32) -> f32 {
    t[x as usize]
}

#[userfn]
fn blur(w: Window<f32>) -> f32 {
    w[-1] + w[1]
}

#[userfn]
fn positive(x: f32) -> bool {
    x > 0.0
}

fn main() {
    Map::new(add);
    Map::new(add).backend(Backend::Cpu).checked(true);
    Reduce::new(add).start(1.0);
    MapReduce::new(add, add);
    MapArray::new(lookup);
    MapOverlap::new(blur, 1).edge(Edge::Cyclic);
    Scan::new(add).mode(ScanMode::Exclusive);
    MapPairs::new(add);
    MapPairsReduce::new(add, add);
    Filter::new(positive);
    Pipeline::from_iter(0..3).stage(|x: i32| Ok(x + 1));
}
