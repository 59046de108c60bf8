use skel::prelude::*;

#[derive(Clone, Copy, DeviceType)]
struct Pixel {
    r: f32,
    g: f32,
}

fn main() {}
