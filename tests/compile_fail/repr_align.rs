use skel::prelude::*;

#[derive(Clone, Copy, DeviceType)]
#[repr(C, align(16))]
struct Pixel {
    r: f32,
    g: f32,
}

fn main() {}
