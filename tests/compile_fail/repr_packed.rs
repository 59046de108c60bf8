use skel::prelude::*;

#[derive(Clone, Copy, DeviceType)]
#[repr(C, packed)]
struct Pixel {
    r: f32,
    g: f32,
}

fn main() {}
