//! `#[userfn]` / `#[derive(DeviceType)]` expansion: the Rust side (traits, `call`, defs).
#![allow(clippy::manual_clamp)]

use skel::plumbing::codegen::ir::ParamKind;
use skel::prelude::*;
use skel::userfn::{ArrayFn, ElementwiseFn, StencilFn, UserFn, Window2Fn, WindowFn};

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct Pixel {
    r: f32,
    g: f32,
    b: f32,
}

#[userfn]
fn grey(px: Pixel, #[uniform] luma: Pixel) -> Pixel {
    let y = px.r * luma.r + px.g * luma.g + px.b * luma.b;
    Pixel { r: y, g: y, b: y }
}

#[userfn]
fn iota(#[index] i: usize) -> u32 {
    i as u32
}

#[userfn]
fn idx2(#[index] (row, col): (usize, usize), x: i32) -> i32 {
    (row * 10 + col) as i32 + x
}

#[userfn]
fn lookup(table: &[f32], x: u32) -> f32 {
    table[x as usize]
}

#[userfn]
fn lookup_mid(#[index] i: usize, a: f32, table: &[f32], #[uniform] s: f32) -> f32 {
    a + table[i] * s
}

#[userfn]
fn blur(w: Window<f32>) -> f32 {
    (w[-1] + w[0] + w[1]) / 3.0
}

#[userfn]
fn lap(w: Window2<f32>, #[uniform] k: f32) -> f32 {
    w[(-1, 0)] + w[(1, 0)] + w[(0, -1)] + w[(0, 1)] - k * w[(0, 0)]
}

#[userfn]
pub fn add3(a: f32, b: f32, c: f32) -> f32 {
    add(add(a, b), c)
}

#[userfn]
fn control(n: i32, x: f32) -> f32 {
    let mut s = 0.0;
    for i in 0..n {
        if i % 2 == 0 {
            s += x;
        } else {
            s -= 0.5 * x;
        }
    }
    let mut k = 0;
    while k < 3 {
        k += 1;
        if k == 2 {
            continue;
        }
        s *= 1.5;
    }
    if s > 100.0 {
        return f32::MAX;
    }
    let t = if s < 0.0 { -s } else { s.sqrt() };
    t.max(f32::consts::PI).min(std::f32::consts::E * 100.0) + f32::powf(2.0, 0.5)
}

#[test]
fn elementwise() {
    assert_eq!(add::call(1.0, 2.0), 3.0);
    assert_eq!(<add as ElementwiseFn>::apply((), (1.0, 2.0), &()), 3.0);
    assert_eq!(add3::call(1.0, 2.0, 3.0), 6.0);
    assert_eq!(<add as UserFn>::NAME, "add");
    let d = <add as UserFn>::definition();
    assert_eq!(d.name, "add");
    assert_eq!(d.params.len(), 2);
    assert_eq!(d.params[0].kind, ParamKind::Elem);
    let luma = Pixel {
        r: 0.5,
        g: 0.25,
        b: 0.25,
    };
    let p = <grey as ElementwiseFn>::apply(
        (),
        (Pixel {
            r: 1.0,
            g: 2.0,
            b: 4.0,
        },),
        &(luma,),
    );
    assert_eq!(
        p,
        Pixel {
            r: 2.0,
            g: 2.0,
            b: 2.0
        }
    );
    assert_eq!(<iota as ElementwiseFn>::apply(7, (), &()), 7);
    assert_eq!(<idx2 as ElementwiseFn>::apply((2, 3), (1,), &()), 24);
    let d = <idx2 as UserFn>::definition();
    assert_eq!(d.params[0].kind, ParamKind::IndexRow);
    assert_eq!(d.params[1].kind, ParamKind::IndexCol);
    assert_eq!(d.params[1].name, "col");
    assert!(control::call(3, 2.0) > 0.0);
}

#[test]
fn array_and_windows() {
    let t = [1.0f32, 2.0, 3.0];
    assert_eq!(<lookup as ArrayFn>::apply((), &t, (2,), &()), 3.0);
    assert_eq!(<lookup_mid as ArrayFn>::apply(1, &t, (1.0,), &(2.0,)), 5.0);
    let w = Window::new(&t, 1);
    assert_eq!(<blur as WindowFn>::apply(w, &()), 2.0);
    let _: <blur as StencilFn>::Radius = 1usize;
    let data = [0.0f32, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0];
    let w2 = Window2::new(&data, 3, (1, 1));
    assert_eq!(<lap as Window2Fn>::apply(w2, &(4.0,)), 0.0);
}

#[test]
fn derive_struct() {
    let ty = <Pixel as DeviceType>::TY;
    assert_eq!(ty.c_struct_name(), Some("Pixel"));
    match ty {
        skel::plumbing::codegen::Ty::Struct(s) => {
            assert_eq!(s.fields.len(), 3);
            assert_eq!(s.fields[2].name, "b");
        }
        _ => panic!(),
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct Kernel {
    w: [f32; 4],
    on: bool,
    pad: [u8; 3],
}

const K0: Kernel = Kernel {
    w: [1.0, 2.0, 3.0, 4.0],
    on: true,
    pad: [7, 8, 9],
};

#[userfn]
fn minmax(a: f32, b: f32, #[uniform] k: [f32; 2]) -> (f32, f32, u32) {
    let _ = K0;
    (a.min(b) * k[0], a.max(b) * k[1], (a < b) as u32)
}

#[test]
fn arrays_tuples_bool_and_constants_on_the_rust_side() {
    use skel::plumbing::codegen::{ir::Expr, ConstValue, Prim, Ty};
    // device types: layout sizes and the C description agree with Rust
    assert_eq!(
        <[f32; 4] as DeviceType>::TY.size(),
        std::mem::size_of::<[f32; 4]>()
    );
    assert_eq!(
        <Kernel as DeviceType>::TY.size(),
        std::mem::size_of::<Kernel>()
    );
    assert_eq!(<(u16, u8, bool) as DeviceType>::TY.size(), 4);
    assert!(matches!(<bool as DeviceType>::TY, Ty::Prim(Prim::Bool)));
    let Ty::Tuple(t) = <(f64, u32, u32) as DeviceType>::TY else {
        panic!("a tuple")
    };
    let offsets: Vec<usize> = t.offsets.to_vec();
    let x = (1.0f64, 2u32, 3u32);
    let base = &x as *const _ as usize;
    assert_eq!(
        offsets,
        vec![
            &x.0 as *const _ as usize - base,
            &x.1 as *const _ as usize - base,
            &x.2 as *const _ as usize - base
        ]
    );
    // the call traits see the tuple return and the array uniform
    assert_eq!(minmax::call(1.0, 2.0, [2.0, 3.0]), (2.0, 6.0, 1));
    let r = <minmax as ElementwiseFn>::apply((), (3.0, 1.0), &([1.0, 1.0],));
    assert_eq!(r, (1.0, 3.0, 0));
    assert_eq!(minmax::outputs().len(), 3);
    assert_eq!(add::outputs().len(), 1);
    // a module constant is captured by value, with its type
    let def = <minmax as UserFn>::definition();
    let skel::plumbing::codegen::ir::Stmt::Expr(Expr::Extern { name, value }) = &def.body.stmts[0]
    else {
        panic!("`let _ = K0` reads the constant: {:?}", def.body.stmts[0])
    };
    let ConstValue { ty, bytes } = value();
    assert_eq!(*name, "K0");
    assert_eq!(ty.c_struct_name(), Some("Kernel"));
    assert_eq!(&bytes[16..], &[1, 7, 8, 9]);
}
