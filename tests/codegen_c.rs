//! The generated C, compiled with the system C compiler and compared with the Rust body.
//!
//! Each user function is emitted in the host-C dialect (and the OpenCL dialect behind a
//! small shim header), compiled with `cc` together with a tiny `main` that reads inputs
//! from stdin and prints the results' bit patterns, and compared with `name::call`.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use proptest::prelude::*;
use skel::plumbing::codegen::{c_type, device_source, Dialect};
use skel::prelude::*;

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct Pixel {
    r: f32,
    g: f32,
    b: f32,
}

#[userfn]
fn arith_f32(a: f32, b: f32) -> f32 {
    a * b + a / (b.abs() + 2.5) - 0.5 * -b
}

#[userfn]
fn arith_f64(a: f64, b: f64) -> f64 {
    a * b + a / (b.abs() + 2.5) - 0.5 * -b
}

#[userfn]
fn arith_i32(a: i32, b: i32) -> i32 {
    (a * 3 + b) / 7 - a % 5 + ((a << 2) ^ (b >> 1)) + (b & 0xff | 3) - -a
}

#[userfn]
fn arith_u32(a: u32, b: u32) -> u32 {
    a / (b | 1) + (a % 13) * 2 + (b >> 3) + !a % 1000
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
    if s > 1000.0 {
        return f32::MAX;
    }
    let t = if s < 0.0 { -s } else { s * 2.0 };
    let u = if t > 10.0 {
        let v = t - 10.0;
        v * v
    } else {
        t
    };
    u.max(std::f32::consts::PI) + 1.0
}

#[userfn]
fn grey(px: Pixel, #[uniform] luma: Pixel) -> Pixel {
    let y = (px.r * luma.r + px.g * luma.g + px.b * luma.b).powf(1.0 / 2.2);
    let q = (y * 255.0).round_ties_even() / 255.0;
    Pixel { b: q, g: q, r: y }
}

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

#[userfn]
fn add3(a: f32, b: f32, c: f32) -> f32 {
    add(add(a, b), c) * 2.0
}

#[userfn]
fn casts(x: f32, n: i32) -> i64 {
    (x as i32 + n) as i64 * 3 + (n as f64 * 0.25) as i64 + (x.abs() as u8) as i64
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
fn lookup(table: &[f32], x: u32) -> f32 {
    table[x as usize % 4] * 2.0
}

#[userfn]
fn iminmax(a: i32, b: i32) -> i32 {
    a.min(b) * 2 + a.max(b) + (a - b).abs() + i32::max(a, 3)
}

#[userfn]
fn lits(x: f32) -> f32 {
    let mut s = 0.0;
    s += x * 0.1;
    let c = 1e-3;
    let h: f32 = 0.5;
    (s.max(c) + h * 3.0).sqrt() + f32::exp(x * 0.01) + (x + 2.0).ln() * 0.25
}

#[userfn]
fn max(a: f32, b: f32) -> f32 {
    let float = a;
    let int = b;
    if float > int {
        float
    } else {
        int
    }
}

macro_rules! pick {
    (f32, $x:expr, $y:expr) => {
        $x
    };
    (f64, $x:expr, $y:expr) => {
        $y
    };
}

/// One user function per float -> integer cast, plus the lists the test needs.
macro_rules! float_casts {
    ($($name:ident($x:ident: $src:ident) -> $ret:ident { $($body:tt)* })*) => {
        $(
            #[userfn]
            fn $name($x: $src) -> $ret {
                $($body)*
            }
        )*
        /// Definition, argument type and signedness of the result of every cast function.
        fn cast_defs() -> Vec<(&'static skel::plumbing::codegen::FnDef, &'static str, bool)> {
            vec![$((
                <$name as skel::userfn::UserFn>::definition(),
                stringify!($src),
                stringify!($ret).starts_with('i'),
            )),*]
        }
        /// The Rust results for `x` (f32 functions) and `y` (f64 functions).
        fn cast_rust(x: f32, y: f64) -> Vec<i128> {
            vec![$($name::call(pick!($src, x, y)) as i128),*]
        }
    };
}

float_casts! {
    f32_i8(x: f32) -> i8 { x as i8 }
    f32_i16(x: f32) -> i16 { x as i16 }
    f32_i32(x: f32) -> i32 { x as i32 }
    f32_i64(x: f32) -> i64 { x as i64 }
    f32_isize(x: f32) -> i64 { x as isize as i64 }
    f32_u8(x: f32) -> u8 { x as u8 }
    f32_u16(x: f32) -> u16 { x as u16 }
    f32_u32(x: f32) -> u32 { x as u32 }
    f32_u64(x: f32) -> u64 { x as u64 }
    f32_usize(x: f32) -> u64 { x as usize as u64 }
    f64_i8(x: f64) -> i8 { x as i8 }
    f64_i16(x: f64) -> i16 { x as i16 }
    f64_i32(x: f64) -> i32 { x as i32 }
    f64_i64(x: f64) -> i64 { x as i64 }
    f64_isize(x: f64) -> i64 { x as isize as i64 }
    f64_u8(x: f64) -> u8 { x as u8 }
    f64_u16(x: f64) -> u16 { x as u16 }
    f64_u32(x: f64) -> u32 { x as u32 }
    f64_u64(x: f64) -> u64 { x as u64 }
    f64_usize(x: f64) -> u64 { x as usize as u64 }
    // a saturated value flowing on into integer arithmetic
    f32_mixed(x: f32) -> i64 { (x * 2.0) as u8 as i64 - (x as i16) as i64 }
}

/// `continue` in inclusive ranges that end at the type's MAX, and `for mut`.
#[userfn]
fn incl_continue(n: u8, m: i32) -> u32 {
    let mut s: u32 = 0;
    for i in n..=u8::MAX {
        if i % 2 == 1 {
            continue;
        }
        s += i as u32;
    }
    for j in m..=i32::MAX {
        if j > m {
            s += 1;
            continue;
        }
        s += 100;
    }
    for i in 250..=u8::MAX {
        if i == u8::MAX {
            continue;
        }
        s += 1000;
    }
    for mut k in 0..=3 {
        k += 10;
        s += k as u32 * 10000;
    }
    for _ in 5..=(n % 5) {
        s += 7;
    }
    s
}

/// Like [`run`], but a program that hangs (an endless loop) fails the test.
fn run_timeout(exe: &std::path::Path, input: &str) -> Vec<String> {
    let mut child = Command::new(exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    // read the output on the side: a full pipe would block the program
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).unwrap();
        s
    });
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > std::time::Duration::from_secs(20) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{} did not finish (endless loop?)", exe.display());
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert!(status.success());
    reader.join().unwrap().lines().map(str::to_string).collect()
}

/// Compiles `src` + `main` with cc; returns the executable path.
fn build(name: &str, src: &str, main: &str) -> std::path::PathBuf {
    build_as(name, src, main, false)
}

/// [`build`], as C++ (`cpp`) for the CUDA dialect behind [`CUDA_SHIM`].
fn build_as(name: &str, src: &str, main: &str, cpp: bool) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("skel_codegen_c_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let c = dir.join(format!("{name}.c"));
    let exe = dir.join(name);
    std::fs::write(
        &c,
        format!("#include <stdio.h>\n#include <string.h>\n{src}\n{main}\n"),
    )
    .unwrap();
    let lang: &[&str] = if cpp {
        &["-x", "c++", "-std=c++14"]
    } else {
        &["-std=c99"]
    };
    let out = Command::new("cc")
        .args(lang)
        .args([
            "-O2",
            "-ffp-contract=off",
            "-Wall",
            "-Werror",
            "-Wno-unused-function",
            "-Wno-unused-value",
            // the OpenCL prelude's `#pragma OPENCL FP_CONTRACT OFF` means -ffp-contract=off here
            "-Wno-unknown-pragmas",
            "-o",
        ])
        .arg(&exe)
        .arg(&c)
        .arg("-lm")
        .output()
        .expect("cc");
    assert!(
        out.status.success(),
        "cc failed:\n{}\n{src}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

fn run(exe: &std::path::Path, input: &str) -> Vec<String> {
    let mut child = Command::new(exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn host<F: skel::userfn::UserFn>() -> String {
    device_source::<F>(Dialect::HostC).unwrap().source
}

fn f32_close(a: f32, b: f32, ulps: u32) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    a == b || (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() <= ulps as u64
}

const MAIN_FF_F: &str = "int main(void){float a,b;unsigned u,v;while(scanf(\"%x %x\",&u,&v)==2){memcpy(&a,&u,4);memcpy(&b,&v,4);float r=ENTRY(a,b);unsigned w;memcpy(&w,&r,4);printf(\"%u\\n\",w);}return 0;}";

fn exe_ff_f<F: skel::userfn::UserFn>(
    name: &str,
    cache: &'static OnceLock<std::path::PathBuf>,
) -> &'static std::path::Path {
    cache.get_or_init(|| {
        let src = device_source::<F>(Dialect::HostC).unwrap();
        let main = MAIN_FF_F.replace("ENTRY", src.entry());
        build(name, &src.source, &main)
    })
}

fn check_ff_f(exe: &std::path::Path, f: fn(f32, f32) -> f32, xs: &[(f32, f32)], ulps: u32) {
    let input: String = xs
        .iter()
        .map(|(a, b)| format!("{:x} {:x}\n", a.to_bits(), b.to_bits()))
        .collect();
    let out = run(exe, &input);
    assert_eq!(out.len(), xs.len());
    for ((a, b), o) in xs.iter().zip(out) {
        let c = f32::from_bits(o.parse().unwrap());
        let r = f(*a, *b);
        assert!(f32_close(c, r, ulps), "f({a}, {b}): C {c} vs Rust {r}");
    }
}

static ARITH_F32: OnceLock<std::path::PathBuf> = OnceLock::new();
static ADD3: OnceLock<std::path::PathBuf> = OnceLock::new();
static CONTROL: OnceLock<std::path::PathBuf> = OnceLock::new();
static LITS: OnceLock<std::path::PathBuf> = OnceLock::new();
static MAXF: OnceLock<std::path::PathBuf> = OnceLock::new();
static ARITH_F64: OnceLock<std::path::PathBuf> = OnceLock::new();
static INTS: OnceLock<std::path::PathBuf> = OnceLock::new();
static GREY: OnceLock<std::path::PathBuf> = OnceLock::new();
static STENCIL: OnceLock<std::path::PathBuf> = OnceLock::new();

fn f() -> impl Strategy<Value = f32> {
    prop_oneof![
        -1000.0f32..1000.0,
        -2.0f32..2.0,
        Just(0.0f32),
        Just(-0.0f32),
        Just(1.0f32)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn exact_f32(xs in prop::collection::vec((f(), f()), 1..300)) {
        check_ff_f(exe_ff_f::<arith_f32>("arith_f32", &ARITH_F32), arith_f32::call, &xs, 0);
        check_ff_f(exe_ff_f::<max>("max", &MAXF), max::call, &xs, 0);
        let add3_2 = |a, b| add3::call(a, b, 1.5);
        let exe = ADD3.get_or_init(|| {
            let src = device_source::<add3>(Dialect::HostC).unwrap();
            build("add3", &src.source, &MAIN_FF_F.replace("ENTRY(a,b)", "skel_fn_add3(a,b,1.5f)"))
        });
        check_ff_f(exe, add3_2, &xs, 0);
        let ctl = |a: f32, b: f32| control::call((a.abs() as i32) % 20, b);
        let exe = CONTROL.get_or_init(|| {
            let src = device_source::<control>(Dialect::HostC).unwrap();
            build("control", &src.source, &MAIN_FF_F.replace("ENTRY(a,b)", "skel_fn_control(((int)fabsf(a)) % 20, b)"))
        });
        check_ff_f(exe, ctl, &xs, 0);
        let lit = |a: f32, _b: f32| lits::call(a.abs());
        let exe = LITS.get_or_init(|| {
            let src = device_source::<lits>(Dialect::HostC).unwrap();
            build("lits", &src.source, &MAIN_FF_F.replace("ENTRY(a,b)", "skel_fn_lits(fabsf(a))"))
        });
        check_ff_f(exe, lit, &xs, 2);
    }

    #[test]
    fn exact_f64_and_ints(xs in prop::collection::vec((-1e6f64..1e6, -1e6f64..1e6, -10000i32..10000, -10000i32..10000, 0u32..1_000_000, 0u32..1_000_000), 1..300)) {
        let exe = ARITH_F64.get_or_init(|| {
            let src = host::<arith_f64>();
            build("arith_f64", &src, "int main(void){double a,b;unsigned long long u,v;while(scanf(\"%llx %llx\",&u,&v)==2){memcpy(&a,&u,8);memcpy(&b,&v,8);double r=skel_fn_arith_f64(a,b);unsigned long long w;memcpy(&w,&r,8);printf(\"%llu\\n\",w);}return 0;}")
        });
        let input: String = xs.iter().map(|x| format!("{:x} {:x}\n", x.0.to_bits(), x.1.to_bits())).collect();
        for (x, o) in xs.iter().zip(run(exe, &input)) {
            prop_assert_eq!(f64::from_bits(o.parse().unwrap()), arith_f64::call(x.0, x.1));
        }
        let exe = INTS.get_or_init(|| {
            let s = skel::plumbing::codegen::device_source_multi(
                &[<arith_i32 as skel::userfn::UserFn>::definition(), <arith_u32 as skel::userfn::UserFn>::definition(), <iminmax as skel::userfn::UserFn>::definition(), <casts as skel::userfn::UserFn>::definition()],
                Dialect::HostC).unwrap();
            build("ints", &s.source, "int main(void){int a,b;unsigned c,d;float x;unsigned xb;while(scanf(\"%d %d %u %u %x\",&a,&b,&c,&d,&xb)==5){memcpy(&x,&xb,4);printf(\"%d %u %d %lld\\n\",skel_fn_arith_i32(a,b),skel_fn_arith_u32(c,d),skel_fn_iminmax(a,b),skel_fn_casts(x,a));}return 0;}")
        });
        let input: String = xs.iter().map(|x| format!("{} {} {} {} {:x}\n", x.2, x.3, x.4, x.5, (x.0 as f32 / 10000.0).to_bits())).collect();
        for (x, o) in xs.iter().zip(run(exe, &input)) {
            let want = format!("{} {} {} {}", arith_i32::call(x.2, x.3), arith_u32::call(x.4, x.5), iminmax::call(x.2, x.3), casts::call(x.0 as f32 / 10000.0, x.2));
            prop_assert_eq!(o, want);
        }
    }

    #[test]
    fn structs_and_stencils(xs in prop::collection::vec((0.0f32..1.0, 0.0f32..1.0, 0.0f32..1.0, -10.0f32..10.0), 9..200)) {
        let luma = Pixel { r: 0.2126, g: 0.7152, b: 0.0722 };
        let exe = GREY.get_or_init(|| {
            let src = host::<grey>();
            build("grey", &src, "int main(void){unsigned a,b,c;Pixel l=skel_make_Pixel(0.2126f,0.7152f,0.0722f);while(scanf(\"%x %x %x\",&a,&b,&c)==3){Pixel p;memcpy(&p.r,&a,4);memcpy(&p.g,&b,4);memcpy(&p.b,&c,4);Pixel q=skel_fn_grey(p,l);memcpy(&a,&q.r,4);memcpy(&b,&q.g,4);memcpy(&c,&q.b,4);printf(\"%u %u %u\\n\",a,b,c);}return 0;}")
        });
        let input: String = xs.iter().map(|x| format!("{:x} {:x} {:x}\n", x.0.to_bits(), x.1.to_bits(), x.2.to_bits())).collect();
        for (x, o) in xs.iter().zip(run(exe, &input)) {
            let want = grey::call(Pixel { r: x.0, g: x.1, b: x.2 }, luma);
            let got: Vec<f32> = o.split(' ').map(|s| f32::from_bits(s.parse().unwrap())).collect();
            prop_assert!(f32_close(got[0], want.r, 2) && f32_close(got[1], want.g, 1) && f32_close(got[2], want.b, 1), "{:?} vs {:?}", got, want);
        }
        // stencils and arrays over the 4th column: n values, 3x3 windows over rows of 3
        let v: Vec<f32> = xs.iter().map(|x| x.3).collect();
        let exe = STENCIL.get_or_init(|| {
            let s = skel::plumbing::codegen::device_source_multi(
                &[<blur as skel::userfn::UserFn>::definition(), <lap as skel::userfn::UserFn>::definition(), <lookup as skel::userfn::UserFn>::definition()],
                Dialect::HostC).unwrap();
            build("stencil", &s.source, "int main(void){static float v[1000];int n=0;unsigned u;while(scanf(\"%x\",&u)==1){memcpy(&v[n++],&u,4);}for(int i=1;i+1<n;i++){float r=skel_fn_blur(&v[i],1);memcpy(&u,&r,4);printf(\"%u\\n\",u);}for(int i=1;i+1<n/3;i++){float r=skel_fn_lap(&v[i*3+1],3,1,1,4.0f);memcpy(&u,&r,4);printf(\"%u\\n\",u);}for(int i=0;i<n;i++){float r=skel_fn_lookup(v,n,(unsigned)(i*7));memcpy(&u,&r,4);printf(\"%u\\n\",u);}return 0;}")
        });
        let input: String = v.iter().map(|x| format!("{:x}\n", x.to_bits())).collect();
        let out: Vec<f32> = run(exe, &input).iter().map(|s| f32::from_bits(s.parse().unwrap())).collect();
        let mut want = Vec::new();
        for i in 1..v.len() - 1 {
            want.push(blur::call(Window::new(&v[i - 1..i + 2], 1)));
        }
        for i in 1..(v.len() / 3).saturating_sub(1) {
            want.push(lap::call(Window2::new(&v[(i - 1) * 3..], 3, (1, 1)), 4.0));
        }
        for i in 0..v.len() {
            want.push(lookup::call(&v, (i * 7) as u32));
        }
        prop_assert_eq!(out, want);
    }
}

#[test]
fn f32_functions_do_no_double_math() {
    for src in [
        host::<arith_f32>(),
        host::<lits>(),
        host::<control>(),
        host::<grey>(),
        host::<blur>(),
    ] {
        let body = &src[src.find("typedef").or(src.find("SKEL_FN float")).unwrap()..];
        assert!(!body.contains("double"), "{src}");
        // every float literal carries the f suffix
        let mut chars = body.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c.is_ascii_digit()
                && (i == 0
                    || !body.as_bytes()[i - 1].is_ascii_alphanumeric()
                        && body.as_bytes()[i - 1] != b'_')
            {
                let rest: String = body[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-')
                    .collect();
                if rest.contains('.') || rest.contains('e') {
                    assert!(
                        rest.ends_with('f'),
                        "unsuffixed float literal `{rest}` in\n{src}"
                    );
                }
                for _ in 1..rest.len() {
                    chars.next();
                }
            }
        }
    }
    assert!(host::<lits>().contains("0.1f"));
    assert!(host::<lits>().contains("sqrtf("));
}

#[test]
fn names_never_collide_with_c() {
    let src = host::<max>();
    assert!(src.contains("skel_fn_max("));
    assert!(src.contains("float float_ = a;"), "{src}");
}

/// OpenCL C built-ins for the host compiler. `convert_<int>_sat_rtz` is modelled after the
/// OpenCL C spec (NaN -> 0, saturate, round toward zero), independently of the code
/// generator's CUDA/host-C helpers: the comparisons are in `long double`, in which every
/// integer bound is exact on x86-64 and aarch64.
const OPENCL_SHIM: &str = "#define __global\n#define __local\n#define __kernel\n#include <math.h>\n#include <stdbool.h>\n#include <limits.h>\ntypedef unsigned char uchar; typedef unsigned short ushort; typedef unsigned int uint; typedef unsigned long ulong;\nstatic inline float pownf_(float x, int n){ return powf(x, (float)n); }\n#define pown(x, n) _Generic((x), float: pownf_, double: pow)((x), (n))\n#define SKEL_SAT(N, T, MN, MX) static inline T convert_##N##_sat_rtz(long double v) { return v != v ? (T)0 : v < (long double)(MN) ? (T)(MN) : v > (long double)(MX) ? (T)(MX) : (T)v; }\nSKEL_SAT(char, char, SCHAR_MIN, SCHAR_MAX) SKEL_SAT(uchar, uchar, 0, UCHAR_MAX) SKEL_SAT(short, short, SHRT_MIN, SHRT_MAX) SKEL_SAT(ushort, ushort, 0, USHRT_MAX)\nSKEL_SAT(int, int, INT_MIN, INT_MAX) SKEL_SAT(uint, uint, 0, UINT_MAX) SKEL_SAT(long, long, LONG_MIN, LONG_MAX) SKEL_SAT(ulong, ulong, 0, ULONG_MAX)\n#include <tgmath.h>\n";

#[test]
fn opencl_and_cuda_dialects_are_sane() {
    for (i, src) in [
        device_source::<grey>(Dialect::OpenCl).unwrap().source,
        device_source::<control>(Dialect::OpenCl).unwrap().source,
        device_source::<lits>(Dialect::OpenCl).unwrap().source,
        skel::plumbing::codegen::device_source_multi(
            &[
                <lap as skel::userfn::UserFn>::definition(),
                <lookup as skel::userfn::UserFn>::definition(),
                <casts as skel::userfn::UserFn>::definition(),
                <iminmax as skel::userfn::UserFn>::definition(),
                <add3 as skel::userfn::UserFn>::definition(),
            ],
            Dialect::OpenCl,
        )
        .unwrap()
        .source,
    ]
    .iter()
    .enumerate()
    {
        assert!(src.contains("SKEL_ARRAY_SPACE __global"));
        let shimmed = format!("{OPENCL_SHIM}{src}");
        build(&format!("ocl{i}"), &shimmed, "int main(void){return 0;}");
    }
    let cuda = device_source::<grey>(Dialect::Cuda).unwrap().source;
    assert!(cuda.contains("static __device__ __forceinline__"));
    assert!(cuda.contains("powf(") && cuda.contains("rintf("));
    let ocl = device_source::<lap>(Dialect::OpenCl).unwrap();
    assert!(
        ocl.source
            .contains("SKEL_WINDOW_SPACE const float* w, long w_stride"),
        "{}",
        ocl.source
    );
}

/// Inputs (f32, f64) around every integer type's bounds, the non-finite values and more.
fn cast_inputs() -> Vec<(f32, f64)> {
    let mut v: Vec<f64> = vec![
        f64::NAN,
        -f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1e10,
        -1e10,
        300.0,
        -1.0,
        -0.5,
        -0.0,
        0.0,
        0.99,
        1.5,
        -1.5,
        2147483647.0,
        2147483647.5,
        -2147483648.5,
        -2147483649.0,
        4294967295.5,
        f64::MAX,
        f64::MIN,
        f32::MAX as f64,
        f32::MIN as f64,
        1e-40,
        5e-324,
        1e300,
        -1e300,
    ];
    for k in 0..70 {
        let p = 2f64.powi(k);
        for d in [-1.0, -0.5, 0.0, 0.5, 1.0] {
            v.push(p + d);
            v.push(-p + d);
        }
    }
    let mut out: Vec<(f32, f64)> = v.iter().map(|&y| (y as f32, y)).collect();
    // the floats next to the powers of two, in both widths
    for k in 0..70 {
        for sign in [1.0f32, -1.0] {
            let (x, y) = (sign * 2f32.powi(k), sign as f64 * 2f64.powi(k));
            out.push((
                f32::from_bits(x.to_bits() - 1),
                f64::from_bits(y.to_bits() - 1),
            ));
            out.push((
                f32::from_bits(x.to_bits() + 1),
                f64::from_bits(y.to_bits() + 1),
            ));
        }
    }
    out
}

#[test]
fn float_to_int_casts_saturate_like_rust() {
    let defs: Vec<_> = cast_defs().iter().map(|d| d.0).collect();
    let inputs = cast_inputs();
    let input: String = inputs
        .iter()
        .map(|(x, y)| format!("{:x} {:x}\n", x.to_bits(), y.to_bits()))
        .collect();
    let want: Vec<String> = inputs
        .iter()
        .map(|&(x, y)| {
            cast_rust(x, y)
                .iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    for (dialect, shim) in [(Dialect::HostC, ""), (Dialect::OpenCl, OPENCL_SHIM)] {
        let src = skel::plumbing::codegen::device_source_multi(&defs, dialect).unwrap();
        let mut main = String::from(
            "int main(void){unsigned xb;unsigned long long yb;float x;double y;while(scanf(\"%x %llx\",&xb,&yb)==2){memcpy(&x,&xb,4);memcpy(&y,&yb,8);",
        );
        for ((_, arg, signed), entry) in cast_defs().iter().zip(&src.entries) {
            let arg = if *arg == "f32" { "x" } else { "y" };
            let (fmt, ty) = if *signed {
                ("%lld", "long long")
            } else {
                ("%llu", "unsigned long long")
            };
            main.push_str(&format!("printf(\"{fmt} \",({ty}){entry}({arg}));"));
        }
        main.push_str("printf(\"\\n\");}return 0;}");
        let name = format!("casts_{dialect:?}");
        let exe = build(&name, &format!("{shim}{}", src.source), &main);
        let out = run_timeout(&exe, &input);
        assert_eq!(out.len(), inputs.len());
        for ((o, w), (x, y)) in out.iter().zip(&want).zip(&inputs) {
            assert_eq!(
                o.trim_end(),
                w,
                "{dialect:?}: casts of {x:e} (f32) / {y:e} (f64)"
            );
        }
        // Both dialects through the explicit helper (NVIDIA's OpenCL gives INT_MIN for a
        // NaN through convert_int_sat_rtz).
        assert!(src.source.contains("x >= 2147483648.0f"), "{}", src.source);
    }
    let cuda = device_source::<f64_u64>(Dialect::Cuda).unwrap().source;
    assert!(
        cuda.contains("SKEL_FN unsigned long long skel_f64_to_u64(double x)")
            && cuda.contains("x >= 18446744073709551616.0 ?"),
        "{cuda}"
    );
}

#[test]
fn inclusive_ranges_end_at_max_even_with_continue() {
    let cases = [
        (0u8, i32::MAX - 3),
        (255, i32::MAX),
        (254, i32::MAX - 1),
        (200, i32::MAX - 10),
    ];
    let input: String = cases.iter().map(|(n, m)| format!("{n} {m}\n")).collect();
    for (dialect, shim) in [(Dialect::HostC, ""), (Dialect::OpenCl, OPENCL_SHIM)] {
        let src = device_source::<incl_continue>(dialect).unwrap();
        let main = format!(
            "int main(void){{unsigned n;int m;while(scanf(\"%u %d\",&n,&m)==2){{printf(\"%u\\n\",{}((unsigned char)n,m));}}return 0;}}",
            src.entry()
        );
        let exe = build(
            &format!("incl_{dialect:?}"),
            &format!("{shim}{}", src.source),
            &main,
        );
        let out = run_timeout(&exe, &input);
        let want: Vec<String> = cases
            .iter()
            .map(|&(n, m)| incl_continue::call(n, m).to_string())
            .collect();
        assert_eq!(out, want, "{dialect:?}\n{}", src.source);
    }
}

// ---- The complete language: local arrays, bool, loop, tuples, .len(), constants, math ----

const GAIN: f32 = 1.5;
const TAPS: [f32; 3] = [0.25, 0.5, 0.25];
const PAIR: (f32, u32) = (0.75, 9);

#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
#[repr(C)]
struct Quad {
    w: [f32; 4],
    n: u32,
    on: bool,
    pad: [u8; 3],
}

const QUAD: Quad = Quad {
    w: [1.0, 2.0, 3.0, 4.0],
    n: 7,
    on: true,
    pad: [0; 3],
};

mod consts {
    pub const OFFSET: i32 = -17;
}

/// A median of nine by insertion sort in a local array.
#[userfn]
fn median9(a: f32, b: f32) -> f32 {
    let mut v = [0.0f32; 9];
    for i in 0..v.len() {
        v[i] = a * (i as f32) - b * ((i * i) % 7) as f32;
    }
    for i in 1..9 {
        let x = v[i];
        let mut j = i;
        while j > 0 && v[j - 1] > x {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
    v[4] + TAPS[0] * GAIN
}

/// Nested array literals, arrays in a struct, a histogram, constants of every kind.
#[userfn]
fn arrays(q: Quad, x: f32) -> f32 {
    let m = [[x, 1.0, 2.0], [3.0, x * x, 5.0]];
    let mut acc = [0.0; 3];
    for r in 0..m.len() {
        for c in 0..m[r].len() {
            acc[c] += m[r][c] * q.w[c];
        }
    }
    let mut h = [0u32; 4];
    for i in 0..q.n % 16 {
        h[(i % 4) as usize] += 1;
    }
    let mut s = acc[0] + acc[1] * 2.0 + acc[2] * 3.0;
    if q.on {
        s = -s;
    }
    let mut q2 = q;
    q2.w[3] = s;
    s + h[1] as f32 + QUAD.w[2] + PAIR.0 * PAIR.1 as f32 + q2.w[3] + consts::OFFSET as f32
}

/// `loop`, `break`, `bool` locals, wrapping methods.
#[userfn]
fn collatz(n: u32, limit: u32) -> u32 {
    let mut x = n;
    let mut steps = 0;
    let mut done = false;
    loop {
        if x <= 1 {
            done = true;
            break;
        }
        if steps >= limit {
            break;
        }
        x = if x % 2 == 0 {
            x / 2
        } else {
            x.wrapping_mul(3).wrapping_add(1)
        };
        steps += 1;
    }
    if done {
        steps
    } else {
        u32::MAX - steps
    }
}

/// `.len()` of a `&[T]` parameter, passed on to a callee; `return` from nested loops.
#[userfn]
fn find_first(t: &[i32], key: i32) -> i32 {
    for i in 0..t.len() {
        if t[i] == key {
            return i as i32;
        }
        let mut k = 0;
        loop {
            k += 1;
            if k > 2 {
                break;
            }
            if t[i] + k == key {
                return -(i as i32) - 100 - count_below(t, key) as i32;
            }
        }
    }
    -1
}

#[userfn]
fn count_below(t: &[i32], key: i32) -> u32 {
    let mut n = 0;
    for i in 0..t.len() {
        if t[i] < key {
            n += 1;
        }
    }
    n
}

#[userfn]
fn polar(x: f32, y: f32) -> (f32, f32) {
    ((x * x + y * y).sqrt(), y.atan2(x))
}

#[userfn]
fn divmod(a: i32, b: i32) -> (i32, i32) {
    if b == 0 {
        return (0, 0);
    }
    (a / b, a % b)
}

/// Destructuring calls and tuple expressions, `.0` of a tuple local, `_`.
#[userfn]
fn use_tuples(x: f32, y: f32) -> f32 {
    let (r, th) = polar(x, y);
    let (a, b) = (th, r);
    let (b, a) = (a, b);
    let p = polar(a, b);
    let (q, _) = divmod(x as i32, (y as i32) | 1);
    r + th + p.0 - p.1 * 2.0 + q as f32 + f32::hypot(a, b)
}

/// Annotated array locals, arrays from `if`, `let _`, `BITS`, `return` inside a block
/// expression, arrays of arrays built from locals.
#[userfn]
fn misc_forms(x: i32, n: u32) -> i32 {
    let a: [i32; 3] = if x > 0 { [x, 1, 2] } else { [0; 3] };
    let _ = a;
    let b = {
        let t = a[0] + a[1];
        if t > 1000 {
            return -1;
        }
        t
    };
    let mut s = b + (n % u8::BITS) as i32;
    let mut i = 0usize;
    while i < a.len() {
        s += a[i];
        i += 1;
    }
    let c = [a, [s, s, s]];
    s + c[1][2] + c[0][0] + i32::BITS as i32
}

#[userfn]
fn is_small(x: f32, #[uniform] limit: f32) -> bool {
    let big = x.abs() > limit;
    !big && !x.is_nan()
}

macro_rules! float_math_fns {
    ($exact:ident, $approx:ident, $t:ident) => {
        /// Methods Rust and C both compute exactly (correctly rounded or exact).
        #[userfn]
        fn $exact(x: $t, y: $t) -> [$t; 16] {
            [
                x.abs(),
                x.sqrt(),
                x.floor(),
                x.ceil(),
                x.round(),
                x.round_ties_even(),
                x.trunc(),
                x.fract(),
                x.min(y),
                x.max(y),
                x.clamp(-1.5, 2.5),
                x.mul_add(y, 0.5),
                x.signum(),
                $t::copysign(x, y),
                if x.is_nan() { 1.0 } else { 0.0 },
                if x.is_finite() { 1.0 } else { 0.0 },
            ]
        }

        /// Methods the math libraries round differently (tolerance in the test).
        #[userfn]
        fn $approx(x: $t, y: $t) -> [$t; 20] {
            [
                x.cbrt(),
                x.powf(y),
                x.powi(3),
                x.exp(),
                x.exp2(),
                x.ln(),
                x.log2(),
                x.log10(),
                x.sin(),
                x.cos(),
                x.tan(),
                x.asin(),
                x.acos(),
                x.atan(),
                y.atan2(x),
                x.sinh(),
                x.cosh(),
                x.tanh(),
                x.hypot(y),
                $t::atan2(x, y),
            ]
        }
    };
}

float_math_fns!(fm_exact_f32, fm_approx_f32, f32);
float_math_fns!(fm_exact_f64, fm_approx_f64, f64);

/// One user function per integer type with every integer method; the reference is
/// computed with Rust's explicitly wrapping methods (what a release build does).
macro_rules! int_math_fns {
    ($($name:ident: $t:ident $(, $abs:ident)?;)*) => {
        $(
            #[userfn]
            fn $name(a: $t, b: $t, n: u32) -> [$t; 13] {
                [
                    a.min(b),
                    $t::max(a, b),
                    a.clamp(3, 100),
                    a.wrapping_add(b),
                    a.wrapping_sub(b),
                    a.wrapping_mul(b),
                    a.rotate_left(n),
                    a.rotate_right(n),
                    a.count_ones() as $t,
                    a.leading_zeros() as $t,
                    a.trailing_zeros() as $t,
                    a.pow(n % 70),
                    a $(.$abs())?,
                ]
            }
        )*
        /// Definitions, whether signed, and the reference results for (a, b, n) given as
        /// 64-bit patterns (truncated to each type).
        fn int_math_defs() -> Vec<(&'static skel::plumbing::codegen::FnDef, bool)> {
            vec![$((<$name as skel::userfn::UserFn>::definition(), $t::MIN != 0)),*]
        }
        fn int_math_rust(a: u64, b: u64, n: u32) -> Vec<Vec<i128>> {
            vec![$({
                let (a, b) = (a as $t, b as $t);
                vec![
                    a.min(b), a.max(b), a.clamp(3, 100), a.wrapping_add(b), a.wrapping_sub(b),
                    a.wrapping_mul(b), a.rotate_left(n), a.rotate_right(n), a.count_ones() as $t,
                    a.leading_zeros() as $t, a.trailing_zeros() as $t, a.wrapping_pow(n % 70),
                    int_math_fns!(@wabs a $($abs)?),
                ].into_iter().map(|v| v as i128).collect()
            }),*]
        }
    };
    (@wabs $a:ident abs) => { $a.wrapping_abs() };
    (@wabs $a:ident) => { $a };
}

int_math_fns! {
    int_i8: i8, abs;
    int_u8: u8;
    int_i16: i16, abs;
    int_u16: u16;
    int_i32: i32, abs;
    int_u32: u32;
    int_i64: i64, abs;
    int_u64: u64;
}

/// The OpenCL built-ins the integer methods use, for the host compiler.
const OPENCL_INT_SHIM: &str = "static inline uint atomic_cmpxchg(volatile uint* p, uint c, uint v){uint o=*p; if(o==c)*p=v; return o;}\n#define popcount(x) _Generic((x), uchar: __builtin_popcount, ushort: __builtin_popcount, uint: __builtin_popcount, ulong: __builtin_popcountl)(x)\nstatic inline uchar clz_u8(uchar x){return x?__builtin_clz(x)-24:8;}\nstatic inline ushort clz_u16(ushort x){return x?__builtin_clz(x)-16:16;}\nstatic inline uint clz_u32(uint x){return x?__builtin_clz(x):32;}\nstatic inline ulong clz_u64(ulong x){return x?__builtin_clzl(x):64;}\n#define clz(x) _Generic((x), uchar: clz_u8, ushort: clz_u16, uint: clz_u32, ulong: clz_u64)(x)\n";

/// The CUDA intrinsics the generated code uses, as documented in the CUDA Math API, for
/// the host C++ compiler (so that the CUDA dialect's helpers are run here too).
const CUDA_SHIM: &str = "#include <math.h>\n#define __device__\nstatic inline unsigned atomicCAS(unsigned* p, unsigned c, unsigned v){unsigned o=*p; if(o==c)*p=v; return o;}\n#define __forceinline__ inline\nstatic inline int __popc(unsigned int x){return __builtin_popcount(x);}\nstatic inline int __popcll(unsigned long long x){return __builtin_popcountll(x);}\nstatic inline int __clz(int x){return x?__builtin_clz((unsigned int)x):32;}\nstatic inline int __clzll(long long x){return x?__builtin_clzll((unsigned long long)x):64;}\n";

/// Every dialect with the shim that lets the host compiler build it.
fn dialects() -> [(Dialect, String); 3] {
    [
        (Dialect::HostC, String::new()),
        (Dialect::OpenCl, format!("{OPENCL_SHIM}{OPENCL_INT_SHIM}")),
        (Dialect::Cuda, CUDA_SHIM.to_string()),
    ]
}

/// 64-bit test values: the bounds of every width, small numbers, powers of two and a
/// pseudo-random walk.
fn int_inputs() -> Vec<(u64, u64, u32)> {
    let mut vals: Vec<u64> = vec![0, 1, 2, 3, 5, 100, 127, 128, 255, 256, 32767, 32768, 65535];
    for bits in [8u32, 16, 32, 64] {
        let top = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        vals.extend([top, top - 1, top >> 1, (top >> 1) + 1, (top >> 1) - 1]);
    }
    for k in 0..64 {
        vals.push(1 << k);
        vals.push((1u64 << k).wrapping_neg());
    }
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..100 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        vals.push(x >> (x % 61));
    }
    let mut out = Vec::new();
    for (i, &a) in vals.iter().enumerate() {
        let b = vals[(i * 7 + 3) % vals.len()];
        out.push((a, b, (i as u32 * 37) % 200));
    }
    out
}

/// One executable per dialect (built once per test process).
type Exes = OnceLock<Vec<(Dialect, std::path::PathBuf)>>;

static INT_EXES: Exes = OnceLock::new();
static FLOAT_EXES: Exes = OnceLock::new();
static LANG_EXES: Exes = OnceLock::new();
static CHECKED_EXES: Exes = OnceLock::new();

/// Builds, once per process, `name` for every dialect: the functions `defs` and the
/// `main` that `main(entries, dialect)` writes.
fn exes(
    cache: &'static Exes,
    name: &str,
    defs: &[&'static skel::plumbing::codegen::FnDef],
    main: impl Fn(&[String], Dialect) -> String,
) -> &'static [(Dialect, std::path::PathBuf)] {
    variant_exes(cache, name, defs, false, main)
}

/// [`exes`] of the checked variant (`checked`) or the plain one.
fn variant_exes(
    cache: &'static Exes,
    name: &str,
    defs: &[&'static skel::plumbing::codegen::FnDef],
    checked: bool,
    main: impl Fn(&[String], Dialect) -> String,
) -> &'static [(Dialect, std::path::PathBuf)] {
    cache.get_or_init(|| {
        dialects()
            .into_iter()
            .map(|(dialect, shim)| {
                let src =
                    skel::plumbing::codegen::device_source_checked(defs, dialect, checked).unwrap();
                let exe = build_as(
                    &format!("{name}_{dialect:?}"),
                    &format!("{shim}{}", src.source),
                    &main(&src.entries, dialect),
                    dialect == Dialect::Cuda,
                );
                (dialect, exe)
            })
            .collect()
    })
}

/// One user function per integer type with every integer operator, compound assignment
/// and negation included; the reference is Rust's explicitly wrapping methods. Divisors are
/// odd (never 0, but -1 for `MIN / -1`); shift amounts run past the width.
macro_rules! int_ops_fns {
    ($($name:ident: $t:ident $(, $neg:tt)?;)*) => {
        $(
            #[userfn]
            fn $name(a: $t, b: $t, n: u32) -> [$t; 13] {
                let mut c = a;
                c += b;
                c *= a;
                c -= 7;
                c <<= n;
                let mut d = a;
                d /= b | 1;
                d %= 5;
                [
                    a + b, a - b, a * b, a << n, a >> n, a << b, a >> b,
                    a / (b | 1), a % (b | 1), c, d, a * a * a - b * 3,
                    $($neg)? a,
                ]
            }
        )*
        fn int_ops_defs() -> Vec<(&'static skel::plumbing::codegen::FnDef, bool)> {
            vec![$((<$name as skel::userfn::UserFn>::definition(), $t::MIN != 0)),*]
        }
        fn int_ops_rust(a: u64, b: u64, n: u32) -> Vec<Vec<i128>> {
            vec![$({
                let (a, b) = (a as $t, b as $t);
                let c = a.wrapping_add(b).wrapping_mul(a).wrapping_sub(7).wrapping_shl(n);
                let d = a.wrapping_div(b | 1).wrapping_rem(5);
                vec![
                    a.wrapping_add(b), a.wrapping_sub(b), a.wrapping_mul(b), a.wrapping_shl(n),
                    a.wrapping_shr(n), a.wrapping_shl(b as u32), a.wrapping_shr(b as u32),
                    a.wrapping_div(b | 1), a.wrapping_rem(b | 1), c, d,
                    a.wrapping_mul(a).wrapping_mul(a).wrapping_sub(b.wrapping_mul(3)),
                    int_ops_fns!(@neg a $($neg)?),
                ].into_iter().map(|v| v as i128).collect()
            }),*]
        }
    };
    (@neg $a:ident -) => { $a.wrapping_neg() };
    (@neg $a:ident) => { $a };
}

int_ops_fns! {
    ops_i8: i8, -;
    ops_u8: u8;
    ops_i16: i16, -;
    ops_u16: u16;
    ops_i32: i32, -;
    ops_u32: u32;
    ops_i64: i64, -;
    ops_u64: u64;
}

static INT_OPS_EXES: Exes = OnceLock::new();

fn int_exes() -> &'static [(Dialect, std::path::PathBuf)] {
    int_array_exes(&INT_EXES, "intmath", int_math_defs())
}

/// The executables of `defs`, functions of `(a, b, n)` returning 13 integers, for every
/// dialect: each input line prints every function's results, `|`-separated.
fn int_array_exes(
    cache: &'static Exes,
    name: &str,
    defs: Vec<(&'static skel::plumbing::codegen::FnDef, bool)>,
) -> &'static [(Dialect, std::path::PathBuf)] {
    let fns: Vec<_> = defs.iter().map(|d| d.0).collect();
    exes(cache, name, &fns, |entries, dialect| {
        let mut main = String::from("int main(void){unsigned long long a,b;unsigned n;while(scanf(\"%llu %llu %u\",&a,&b,&n)==3){");
        for ((def, signed), entry) in defs.iter().zip(entries) {
            let skel::plumbing::codegen::Ty::Array(arr) = def.ret else {
                panic!("an array return")
            };
            let (rt, ct) = (c_type(def.ret, dialect), c_type(arr.elem, dialect));
            let (fmt, cast) = if *signed {
                ("%lld", "long long")
            } else {
                ("%llu", "unsigned long long")
            };
            main.push_str(&format!(
                "{{{rt} r={entry}(({ct})a,({ct})b,n);for(int k=0;k<13;k++)printf(\"{fmt} \",({cast})r.v[k]);}}printf(\"|\");"
            ));
        }
        main.push_str("printf(\"\\n\");}return 0;}");
        main
    })
}

fn check_int_methods(inputs: &[(u64, u64, u32)]) {
    check_int_arrays(int_exes(), int_math_rust, inputs);
}

fn check_int_arrays(
    exes: &[(Dialect, std::path::PathBuf)],
    rust: fn(u64, u64, u32) -> Vec<Vec<i128>>,
    inputs: &[(u64, u64, u32)],
) {
    let input: String = inputs
        .iter()
        .map(|(a, b, n)| format!("{a} {b} {n}\n"))
        .collect();
    for (dialect, exe) in exes {
        let out = run_timeout(exe, &input);
        assert_eq!(out.len(), inputs.len());
        for (o, &(a, b, n)) in out.iter().zip(inputs) {
            let got: Vec<Vec<i128>> = o
                .trim_end_matches('|')
                .split('|')
                .map(|f| f.split_whitespace().map(|v| v.parse().unwrap()).collect())
                .collect();
            assert_eq!(got, rust(a, b, n), "{dialect:?}: a={a:#x} b={b:#x} n={n}");
        }
    }
}

#[test]
fn integer_methods_match_rust_in_release() {
    check_int_methods(&int_inputs());
}

/// The Rust side (`call`, in this debug build) and the C of every dialect wrap alike at
/// the extremes: no overflow panic in Rust, no undefined behaviour in C.
#[test]
fn integer_operators_wrap_in_rust_and_c() {
    let inputs = int_inputs();
    for &(a, b, n) in &inputs {
        let got = [
            ops_i8::call(a as i8, b as i8, n)
                .map(|v| v as i128)
                .to_vec(),
            ops_u16::call(a as u16, b as u16, n)
                .map(|v| v as i128)
                .to_vec(),
            ops_i32::call(a as i32, b as i32, n)
                .map(|v| v as i128)
                .to_vec(),
            ops_i64::call(a as i64, b as i64, n)
                .map(|v| v as i128)
                .to_vec(),
        ];
        let want = int_ops_rust(a, b, n);
        assert_eq!(
            got,
            [
                want[0].clone(),
                want[3].clone(),
                want[4].clone(),
                want[6].clone()
            ]
        );
    }
    let exes = int_array_exes(&INT_OPS_EXES, "intops", int_ops_defs());
    check_int_arrays(exes, int_ops_rust, &inputs);
}

/// Floats that exercise every method's corner: zeros of both signs, halves (rounding),
/// the non-finite values, subnormals, huge values, and a spread of ordinary ones.
fn float_inputs() -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = vec![
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        -1.5,
        2.5,
        -2.5,
        1.0,
        -1.0,
        0.3,
        -0.7,
        3.0,
        1e-40,
        -1e-310,
        1e30,
        -1e30,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        4503599627370497.0,
        8388609.0,
    ];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..60 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(((x >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 20.0);
    }
    let n = v.len();
    (0..n)
        .flat_map(|i| [(v[i], v[(i * 5 + 1) % n]), (v[i], v[i])])
        .collect()
}

/// Equal, both NaN, or (`ulps` > 0) at most `ulps` representable values apart; a min/max of
/// two zeros may be either zero in both languages.
fn close_bits(a: u64, b: u64, width: u32, ulps: u64, zeros_equal: bool) -> bool {
    let (nan, zero) = if width == 32 {
        let (x, y) = (f32::from_bits(a as u32), f32::from_bits(b as u32));
        (x.is_nan() && y.is_nan(), x == 0.0 && y == 0.0)
    } else {
        let (x, y) = (f64::from_bits(a), f64::from_bits(b));
        (x.is_nan() && y.is_nan(), x == 0.0 && y == 0.0)
    };
    let ord = |v: u64| {
        let sign = 1u64 << (width - 1);
        if v & sign != 0 {
            -((v & !sign) as i128)
        } else {
            v as i128
        }
    };
    a == b || nan || (zeros_equal && zero) || (ord(a) - ord(b)).unsigned_abs() <= ulps as u128
}

/// Transcendental functions (cbrt powf powi exp exp2 ln log2 log10 sin cos tan asin acos
/// atan atan2 sinh cosh tanh hypot) may differ between Rust's and C's math libraries by a
/// few units in the last place; here, on the host, at most this many.
const APPROX_ULPS: u64 = 4;

fn float_exes() -> &'static [(Dialect, std::path::PathBuf)] {
    let defs = [
        <fm_exact_f32 as skel::userfn::UserFn>::definition(),
        <fm_approx_f32 as skel::userfn::UserFn>::definition(),
        <fm_exact_f64 as skel::userfn::UserFn>::definition(),
        <fm_approx_f64 as skel::userfn::UserFn>::definition(),
    ];
    exes(&FLOAT_EXES, "floatmath", &defs, |e, _| {
        format!(
            "int main(void){{unsigned long long xb,yb;while(scanf(\"%llx %llx\",&xb,&yb)==2){{double x,y;memcpy(&x,&xb,8);memcpy(&y,&yb,8);float xf=(float)x,yf=(float)y;\
             skel_a16_f32 a={}(xf,yf);skel_a20_f32 b={}(xf,yf);skel_a16_f64 c={}(x,y);skel_a20_f64 d={}(x,y);unsigned u;unsigned long long w;\
             for(int k=0;k<16;k++){{memcpy(&u,&a.v[k],4);printf(\"%x \",u);}}for(int k=0;k<20;k++){{memcpy(&u,&b.v[k],4);printf(\"%x \",u);}}\
             for(int k=0;k<16;k++){{memcpy(&w,&c.v[k],8);printf(\"%llx \",w);}}for(int k=0;k<20;k++){{memcpy(&w,&d.v[k],8);printf(\"%llx \",w);}}printf(\"\\n\");}}return 0;}}",
            e[0], e[1], e[2], e[3]
        )
    })
}

fn check_float_methods(inputs: &[(f64, f64)]) {
    let input: String = inputs
        .iter()
        .map(|(x, y)| format!("{:x} {:x}\n", x.to_bits(), y.to_bits()))
        .collect();
    for (dialect, exe) in float_exes() {
        let out = run_timeout(exe, &input);
        assert_eq!(out.len(), inputs.len());
        for (o, &(x, y)) in out.iter().zip(inputs) {
            let got: Vec<u64> = o
                .split_whitespace()
                .map(|v| u64::from_str_radix(v, 16).unwrap())
                .collect();
            let (xf, yf) = (x as f32, y as f32);
            let want: Vec<(u64, u32, u64, bool)> = fm_exact_f32::call(xf, yf)
                .iter()
                .enumerate()
                .map(|(k, v)| (v.to_bits() as u64, 32, 0, k == 8 || k == 9))
                .chain(
                    fm_approx_f32::call(xf, yf)
                        .iter()
                        .map(|v| (v.to_bits() as u64, 32, APPROX_ULPS, false)),
                )
                .chain(
                    fm_exact_f64::call(x, y)
                        .iter()
                        .enumerate()
                        .map(|(k, v)| (v.to_bits(), 64, 0, k == 8 || k == 9)),
                )
                .chain(
                    fm_approx_f64::call(x, y)
                        .iter()
                        .map(|v| (v.to_bits(), 64, APPROX_ULPS, false)),
                )
                .collect();
            assert_eq!(got.len(), want.len());
            for (k, (g, (w, width, ulps, zeros))) in got.iter().zip(&want).enumerate() {
                assert!(
                    close_bits(*g, *w, *width, *ulps, *zeros),
                    "{dialect:?}: result {k} for x={x:e} y={y:e}: C {g:#x} vs Rust {w:#x}"
                );
            }
        }
    }
}

#[test]
fn float_methods_match_rust() {
    check_float_methods(&float_inputs());
}

/// The table `find_first` searches.
fn lang_table() -> Vec<i32> {
    (0..23).map(|i| (i * 7919) % 61 - 20).collect()
}

fn lang_exes() -> &'static [(Dialect, std::path::PathBuf)] {
    let defs = [
        <median9 as skel::userfn::UserFn>::definition(),
        <arrays as skel::userfn::UserFn>::definition(),
        <collatz as skel::userfn::UserFn>::definition(),
        <find_first as skel::userfn::UserFn>::definition(),
        <use_tuples as skel::userfn::UserFn>::definition(),
        <is_small as skel::userfn::UserFn>::definition(),
        <divmod as skel::userfn::UserFn>::definition(),
        <misc_forms as skel::userfn::UserFn>::definition(),
    ];
    let tl: Vec<String> = lang_table().iter().map(|v| v.to_string()).collect();
    exes(&LANG_EXES, "lang", &defs, |e, _| {
        format!(
            "int main(void){{int t[23]={{{}}};Quad q;q.w.v[0]=0.5f;q.w.v[1]=-1.0f;q.w.v[2]=2.0f;q.w.v[3]=0.25f;q.n=11;q.on=1;q.pad.v[0]=1;q.pad.v[1]=2;q.pad.v[2]=3;\
             unsigned xb,yb,n;int k;while(scanf(\"%x %x %u %d\",&xb,&yb,&n,&k)==4){{float x,y,r;memcpy(&x,&xb,4);memcpy(&y,&yb,4);\
             r={}(x,y);memcpy(&xb,&r,4);printf(\"%x \",xb);r={}(q,x);memcpy(&xb,&r,4);printf(\"%x \",xb);printf(\"%u \",{}(n,100u));\
             printf(\"%d \",{}(t,23,k));r={}(x,y);memcpy(&xb,&r,4);printf(\"%x \",xb);printf(\"%d \",(int){}(x,3.0f));\
             skel_t2_i32i32 dm={}(k,(int)n%7);printf(\"%d %d %d\\n\",dm.f0,dm.f1,{}(k*37,n));}}return 0;}}",
            tl.join(","),
            e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]
        )
    })
}

fn check_lang(inputs: &[(f32, f32, u32, i32)]) {
    let table = lang_table();
    let input: String = inputs
        .iter()
        .map(|(x, y, n, k)| format!("{:x} {:x} {n} {k}\n", x.to_bits(), y.to_bits()))
        .collect();
    let quad = Quad {
        w: [0.5, -1.0, 2.0, 0.25],
        n: 11,
        on: true,
        pad: [1, 2, 3],
    };
    for (dialect, exe) in lang_exes() {
        let out = run_timeout(exe, &input);
        assert_eq!(out.len(), inputs.len());
        for (o, &(x, y, n, k)) in out.iter().zip(inputs) {
            let dm = divmod::call(k, n as i32 % 7);
            let want = format!(
                "{:x} {:x} {} {} {:x} {} {} {} {}",
                median9::call(x, y).to_bits(),
                arrays::call(quad, x).to_bits(),
                collatz::call(n, 100),
                find_first::call(&table, k),
                use_tuples::call(x, y).to_bits(),
                is_small::call(x, 3.0) as i32,
                dm.0,
                dm.1,
                misc_forms::call(k * 37, n)
            );
            assert_eq!(o, &want, "{dialect:?}: x={x:e} y={y:e} n={n} k={k}");
        }
    }
}

#[test]
fn arrays_loops_tuples_and_constants_match_rust() {
    let inputs: Vec<(f32, f32, u32, i32)> = float_inputs()
        .iter()
        .enumerate()
        .filter(|(_, (x, y))| x.is_finite() && y.is_finite() && x.abs() < 1e6 && y.abs() < 1e6)
        .map(|(i, &(x, y))| {
            (
                x as f32,
                y as f32,
                (i as u32).wrapping_mul(2654435761) % 100_000,
                (i as i32 % 70) - 25,
            )
        })
        .collect();
    check_lang(&inputs);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn prop_the_language_matches_rust(
        ints in prop::collection::vec((any::<u64>(), any::<u64>(), any::<u32>()), 1..200),
        floats in prop::collection::vec((-1e3f64..1e3, -1e3f64..1e3), 1..200),
        lang in prop::collection::vec((-1e4f32..1e4, -1e4f32..1e4, 0u32..1_000_000, -30i32..60), 1..200),
    ) {
        check_int_methods(&ints);
        check_float_methods(&floats);
        check_lang(&lang);
    }
}

#[test]
fn language_forms_in_every_dialect() {
    for d in [Dialect::Cuda, Dialect::OpenCl, Dialect::HostC] {
        let s = device_source::<find_first>(d).unwrap().source;
        let len = c_type(
            skel::plumbing::codegen::Ty::Prim(skel::plumbing::codegen::Prim::Usize),
            d,
        );
        assert!(
            s.contains(&format!(
                "SKEL_ARRAY_SPACE const int* t, {len} t_len, int key"
            )),
            "{s}"
        );
        assert!(s.contains("skel_fn_count_below(t, t_len, key)"), "{s}");
        let q = device_source::<arrays>(d).unwrap().source;
        let b = if d == Dialect::OpenCl {
            "uchar on;"
        } else {
            "bool on;"
        };
        assert!(q.contains("skel_a4_f32 w;") && q.contains(b), "{q}");
        let p = device_source::<polar>(d).unwrap().source;
        assert!(p.contains("SKEL_FN skel_t2_f32f32 skel_fn_polar("), "{p}");
    }
    assert!(skel::plumbing::codegen::array_len_param(
        <find_first as skel::userfn::UserFn>::definition()
    ));
    // an array the body indexes takes its length: the index stays inside it
    assert!(skel::plumbing::codegen::array_len_param(
        <lookup as skel::userfn::UserFn>::definition()
    ));
    let cuda = device_source::<int_u32>(Dialect::Cuda).unwrap().source;
    assert!(
        cuda.contains("__popc(") && cuda.contains("__clz("),
        "{cuda}"
    );
}

#[userfn]
fn probe_inner(t: &[i32], k: u32) -> i32 {
    t[k as usize] % (k as i32 - 2)
}

/// At most one fault per input below (C evaluates operands in no fixed order).
#[userfn]
fn probe_checked(t: &[i32], i: u32, k: u32, d: i32) -> i32 {
    let h = [1, 2, 3];
    t[i as usize] + h[k as usize] + 100 / d + probe_inner(t, k)
}

/// The checked variant of every dialect records the fault the Rust side reports (kind,
/// index, length, function), and without a fault computes what Rust computes.
#[test]
fn checked_c_records_the_fault_rust_reports() {
    let table = [10, 20, 30, 40];
    let defs = [<probe_checked as skel::userfn::UserFn>::definition()];
    let names = skel::plumbing::codegen::checked_functions(&defs);
    let exes = variant_exes(&CHECKED_EXES, "checked", &defs, true, |e, _| {
        format!(
            "int main(void){{int t[4]={{10,20,30,40}};unsigned i,k;int d;while(scanf(\"%u %u %d\",&i,&k,&d)==3){{\
             unsigned f[6]={{0,0,0,0,0,0}};int r={}(f,t,4,i,k,d);printf(\"%d %u %u %u %u %u %u\\n\",r,f[0],f[1],f[2],f[3],f[4],f[5]);}}return 0;}}",
            e[0]
        )
    });
    // (i, k, d): none, each fault alone, and `MIN`-free wrapping left to other tests
    let inputs = [
        (0u32, 0u32, 1i32),
        (3, 1, -7),
        (4, 0, 1),
        (9, 1, 5),
        (1, 3, 1),
        (2, 0, 0),
        (0, 2, 3),
    ];
    let input: String = inputs
        .iter()
        .map(|(i, k, d)| format!("{i} {k} {d}\n"))
        .collect();
    for (dialect, exe) in exes {
        let out = run_timeout(exe, &input);
        assert_eq!(out.len(), inputs.len());
        for (o, &(i, k, d)) in out.iter().zip(&inputs) {
            let got: Vec<i64> = o.split_whitespace().map(|v| v.parse().unwrap()).collect();
            let rust = std::panic::catch_unwind(|| probe_checked::call(&table, i, k, d));
            match rust {
                Ok(v) => assert_eq!(
                    got,
                    [v as i64, 0, 0, 0, 0, 0, 0],
                    "{dialect:?} ({i}, {k}, {d})"
                ),
                Err(payload) => {
                    let f = payload
                        .downcast_ref::<skel::check::Fault>()
                        .expect("a Fault");
                    let want = [
                        f.kind.code() as i64,
                        f.index & 0xffff_ffff,
                        f.index >> 32 & 0xffff_ffff,
                        f.len as i64,
                        0,
                    ];
                    assert_eq!(got[1..6], want, "{dialect:?} ({i}, {k}, {d})");
                    assert_eq!(
                        Some(names[got[6] as usize]),
                        f.function,
                        "{dialect:?} ({i}, {k}, {d})"
                    );
                }
            }
        }
    }
}

/// Every draw kind of a `&mut Random` parameter, mixed so that each bit counts.
#[userfn]
fn draws(#[index] i: usize, rng: &mut Random) -> u64 {
    let a = rng.next_u64();
    let b = rng.next_u32();
    let c = rng.next_f32();
    let d = rng.next_f64();
    let mut s = a ^ (b as u64) ^ i as u64;
    for _ in 0..5 {
        s = s.rotate_left(9) ^ rng.next_u32() as u64;
    }
    s ^ ((c * 16_777_216.0) as u64) << 7 ^ ((d * 9_007_199_254_740_992.0) as u64)
}

/// The C translation of a function with `&mut Random` (the generator's Philox rounds
/// included) draws the bits `Random::at` draws in Rust, in the host-C and OpenCL dialects;
/// the CUDA dialect compiles as C++.
#[test]
fn random_draws_match_rust_in_c() {
    let cases: Vec<(usize, u64)> = [0usize, 1, 2, 3, 4, 5, 1 << 31, (1 << 32) + 7, usize::MAX]
        .iter()
        .flat_map(|&i| [0u64, 42, u64::MAX, 0x1234_5678_9abc_def0].map(|s| (i, s)))
        .collect();
    let input: String = cases
        .iter()
        .map(|(i, s)| format!("{i:x} {s:x}\n"))
        .collect();
    let main = "int main(void){unsigned long long i,s;while(scanf(\"%llx %llx\",&i,&s)==2){unsigned long long r=ENTRY(i,s);printf(\"%llu\\n\",r);}return 0;}";
    for (dialect, shim) in [(Dialect::HostC, ""), (Dialect::OpenCl, OPENCL_SHIM)] {
        let src = device_source::<draws>(dialect).unwrap();
        let exe = build(
            &format!("random_{dialect:?}"),
            &format!("{shim}{}", src.source),
            &main.replace("ENTRY", src.entry()),
        );
        let out = run(&exe, &input);
        for ((i, seed), got) in cases.iter().zip(&out) {
            let want = draws::call(*i, &mut Random::at(*seed, *i));
            assert_eq!(got, &want.to_string(), "{dialect:?} i={i} seed={seed}");
        }
        assert_eq!(out.len(), cases.len());
    }
    let cuda = device_source::<draws>(Dialect::Cuda).unwrap().source;
    assert!(cuda.contains("skel_philox"), "{cuda}");
}
