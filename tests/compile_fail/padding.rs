use skel::prelude::*;

#[derive(Clone, Copy, DeviceType)]
#[repr(C)]
struct Padded {
    a: u8,
    b: f32,
}

fn main() {}
