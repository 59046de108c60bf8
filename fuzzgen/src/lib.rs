//! Test-only generator of random, well-typed `#[userfn]` functions for skel's fuzz suite
//! (`tests/suite/fuzz.rs`): `userfns!(SEED, COUNT)` expands to `COUNT` user functions
//! `fz_0 ..` drawn from `SEED`, and `fz_cases()`, each function's name, source and a call
//! of it through `Map` on a backend.
//!
//! Every function has the same signature, `(#[index] i: usize, ti: &[i32], tf: &[f32],
//! a: i32, b: u32, x: f32, y: f64) -> (f64, i64, f32, u32)`, and a body of `let`s,
//! assignments, `if`/`else`, `for`/`while` loops over constant ranges, a local array
//! filled in a loop and read at a reduced index, and expressions of `i32`, `u32`, `f32`,
//! `f64` and `bool`: arithmetic (wrapping), shifts, bit operations, comparisons, casts,
//! `min`/`max`/`clamp`, `abs`, `sqrt`, `floor`/`ceil`/`round`/`trunc`, `mul_add`, reads
//! of `ti`/`tf` at a reduced index. Nothing in a body faults (divisors are odd, indices
//! reduced modulo the length, `clamp` bounds ordered constants) and nothing in it may
//! differ between backends by the float table of skel's README (no transcendental
//! functions), so every backend must give the `cpu` backend's results: integers bit for
//! bit, floats bit for bit or both NaN.
//!
//! `SKEL_FUZZ_BODIES=n` and `SKEL_FUZZ_SEED=s` (read when the suite compiles; a change
//! rebuilds it) override the count and the seed the suite passes.

use proc_macro::TokenStream;
use quote::quote;

/// `userfns!(SEED, COUNT)`: see the crate documentation.
#[proc_macro]
pub fn userfns(input: TokenStream) -> TokenStream {
    let text = input.to_string();
    let nums: Vec<u64> = text
        .split(',')
        .map(|s| {
            let s = s.trim().replace('_', "");
            match s.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => s.parse(),
            }
            .expect("userfns!(SEED, COUNT): two integers")
        })
        .collect();
    let env = |k: &str| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    let seed = env("SKEL_FUZZ_SEED").unwrap_or(nums[0]);
    let count = env("SKEL_FUZZ_BODIES").unwrap_or(nums[1]) as usize;
    let mut fns = proc_macro2::TokenStream::new();
    let mut cases = Vec::new();
    for k in 0..count {
        let mut g = Gen::new(seed ^ (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let name = format!("fz_{k}");
        let src = g.function(&name);
        let ts: proc_macro2::TokenStream = src.parse().expect("generated source parses");
        fns.extend(ts);
        let ident = proc_macro2::Ident::new(&name, proc_macro2::Span::call_site());
        cases.push(quote! {
            (#name, #src, |inp: &FuzzInputs, be: Backend, checked: bool| {
                let mut o = FuzzOutputs::new(inp.n());
                Map::new(#ident)
                    .arrays((&inp.ti, &inp.tf))
                    .backend(be)
                    .checked(checked)
                    .run(&inp.a, &inp.b, &inp.x, &inp.y,
                         &mut (&mut o.r64, &mut o.ri, &mut o.r32, &mut o.ru))?;
                Ok(o)
            })
        });
    }
    quote! {
        // Rebuild when the settings change (the expansion above read them).
        const _: (Option<&str>, Option<&str>) =
            (option_env!("SKEL_FUZZ_BODIES"), option_env!("SKEL_FUZZ_SEED"));
        /// The seed the functions were drawn from.
        pub const FUZZ_SEED: u64 = #seed;
        #fns
        /// Each generated function: its name, its source and a call on a backend.
        #[allow(clippy::type_complexity)]
        pub fn fz_cases() -> Vec<(
            &'static str,
            &'static str,
            fn(&FuzzInputs, Backend, bool) -> skel::Result<FuzzOutputs>,
        )> {
            vec![#(#cases),*]
        }
    }
    .into()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum T {
    I32,
    U32,
    F32,
    F64,
    Bool,
}

impl T {
    fn name(self) -> &'static str {
        match self {
            T::I32 => "i32",
            T::U32 => "u32",
            T::F32 => "f32",
            T::F64 => "f64",
            T::Bool => "bool",
        }
    }
}

struct Gen {
    s: u64,
    /// Variables in scope and their types.
    vars: Vec<(String, T)>,
    /// Mutable locals (assignable).
    muts: Vec<(String, T)>,
    next: usize,
}

impl Gen {
    fn new(seed: u64) -> Self {
        Gen {
            s: seed ^ 0x2545_F491_4F6C_DD1D,
            vars: Vec::new(),
            muts: Vec::new(),
            next: 0,
        }
    }

    /// splitmix64
    fn u(&mut self) -> u64 {
        self.s = self.s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.u() % n
    }

    fn pick<'a, X>(&mut self, xs: &'a [X]) -> &'a X {
        &xs[self.below(xs.len() as u64) as usize]
    }

    fn fresh(&mut self) -> String {
        self.next += 1;
        format!("v{}", self.next)
    }

    /// A literal, in parentheses when negative (`-1.0f32.abs()` is `-(1.0f32.abs())`).
    fn lit(&mut self, t: T) -> String {
        let l = self.lit_text(t);
        if l.starts_with('-') {
            format!("({l})")
        } else {
            l
        }
    }

    fn lit_text(&mut self, t: T) -> String {
        match t {
            T::I32 => self
                .pick(&[
                    "0i32",
                    "1i32",
                    "-1i32",
                    "7i32",
                    "-13i32",
                    "i32::MAX",
                    "i32::MIN",
                    "255i32",
                    "100000i32",
                ])
                .to_string(),
            T::U32 => self
                .pick(&[
                    "0u32",
                    "1u32",
                    "3u32",
                    "u32::MAX",
                    "2147483648u32",
                    "65535u32",
                    "12345u32",
                ])
                .to_string(),
            T::F32 => self
                .pick(&[
                    "0.0f32",
                    "-0.0f32",
                    "1.0f32",
                    "-2.5f32",
                    "0.1f32",
                    "3.0e5f32",
                    "f32::MAX",
                    "f32::INFINITY",
                    "1.0e-3f32",
                ])
                .to_string(),
            T::F64 => self
                .pick(&[
                    "0.0f64",
                    "-0.0f64",
                    "1.0f64",
                    "-2.5f64",
                    "0.1f64",
                    "3.0e5f64",
                    "1.0e300f64",
                    "f64::NEG_INFINITY",
                    "1.0e-3f64",
                ])
                .to_string(),
            T::Bool => self.pick(&["true", "false"]).to_string(),
        }
    }

    fn var(&mut self, t: T) -> Option<String> {
        let vs: Vec<String> = self
            .vars
            .iter()
            .filter(|(_, vt)| *vt == t)
            .map(|(n, _)| n.clone())
            .collect();
        (!vs.is_empty()).then(|| self.pick(&vs).clone())
    }

    fn leaf(&mut self, t: T) -> String {
        if self.below(3) > 0 {
            if let Some(v) = self.var(t) {
                return v;
            }
        }
        self.lit(t)
    }

    /// A random expression of type `t`, at most `d` levels deep, parenthesised.
    fn expr(&mut self, t: T, d: u32) -> String {
        if d == 0 || self.below(4) == 0 {
            return self.leaf(t);
        }
        let d = d - 1;
        let e = match t {
            T::I32 | T::U32 => self.int_expr(t, d),
            T::F32 | T::F64 => self.float_expr(t, d),
            T::Bool => self.bool_expr(d),
        };
        format!("({e})")
    }

    fn int_expr(&mut self, t: T, d: u32) -> String {
        let n = t.name();
        let other = if t == T::I32 { T::U32 } else { T::I32 };
        match self.below(20) {
            0 => format!("{} + {}", self.expr(t, d), self.expr(t, d)),
            1 => format!("{} - {}", self.expr(t, d), self.expr(t, d)),
            2 => format!("{} * {}", self.expr(t, d), self.expr(t, d)),
            3 => format!("{} / ({} | 1)", self.expr(t, d), self.expr(t, d)),
            4 => format!("{} % ({} | 1)", self.expr(t, d), self.expr(t, d)),
            5 => format!("{} << {}", self.expr(t, d), self.below(32)),
            6 => format!("{} >> {}", self.expr(t, d), self.below(32)),
            7 => format!("{} ^ {}", self.expr(t, d), self.expr(t, d)),
            8 => format!(
                "{} & {} | {}",
                self.expr(t, d),
                self.expr(t, d),
                self.expr(t, d)
            ),
            9 => format!("{}.min({})", self.expr(t, d), self.expr(t, d)),
            10 => format!("{}.max({})", self.expr(t, d), self.expr(t, d)),
            11 => {
                let lo = self.below(200) as i64 - if t == T::I32 { 100 } else { 0 };
                let hi = lo + self.below(1000) as i64;
                format!("{}.clamp({lo}, {hi})", self.expr(t, d))
            }
            12 => format!("{} as {n}", self.expr(other, d)),
            13 => {
                let f = *self.pick(&[T::F32, T::F64]);
                format!("{} as {n}", self.expr(f, d))
            }
            14 => format!("{} as {n}", self.expr(T::Bool, d)),
            15 => format!(
                "if {} {{ {} }} else {{ {} }}",
                self.expr(T::Bool, d),
                self.expr(t, d),
                self.expr(t, d)
            ),
            16 => format!("ti[({} as usize) % ti.len()] as {n}", self.expr(T::U32, d)),
            17 => format!("{}.wrapping_mul({})", self.expr(t, d), self.expr(t, d)),
            18 => format!("{}.count_ones() as {n}", self.expr(t, d)),
            _ => {
                if t == T::I32 {
                    format!("{}.abs()", self.expr(t, d))
                } else {
                    format!("{}.rotate_left({})", self.expr(t, d), self.below(32))
                }
            }
        }
    }

    fn float_expr(&mut self, t: T, d: u32) -> String {
        let n = t.name();
        let other = if t == T::F32 { T::F64 } else { T::F32 };
        match self.below(18) {
            0 => format!("{} + {}", self.expr(t, d), self.expr(t, d)),
            1 => format!("{} - {}", self.expr(t, d), self.expr(t, d)),
            2 => format!("{} * {}", self.expr(t, d), self.expr(t, d)),
            3 => format!("{} / {}", self.expr(t, d), self.expr(t, d)),
            4 => format!("-{}", self.expr(t, d)),
            5 => format!("{}.sqrt()", self.expr(t, d)),
            6 => format!("{}.abs()", self.expr(t, d)),
            7 => format!(
                "{}.{}()",
                self.expr(t, d),
                self.pick(&["floor", "ceil", "round", "trunc"])
            ),
            8 => format!("{}.min({})", self.expr(t, d), self.expr(t, d)),
            9 => format!("{}.max({})", self.expr(t, d), self.expr(t, d)),
            10 => format!("{}.clamp(-8.5, 1.0e4)", self.expr(t, d)),
            11 => format!("{} as {n}", self.expr(other, d)),
            12 => {
                let i = *self.pick(&[T::I32, T::U32]);
                format!("{} as {n}", self.expr(i, d))
            }
            13 => format!(
                "{}.mul_add({}, {})",
                self.expr(t, d),
                self.expr(t, d),
                self.expr(t, d)
            ),
            14 => format!(
                "if {} {{ {} }} else {{ {} }}",
                self.expr(T::Bool, d),
                self.expr(t, d),
                self.expr(t, d)
            ),
            15 => format!("tf[({} as usize) % tf.len()] as {n}", self.expr(T::U32, d)),
            16 => format!("{}.powi({})", self.expr(t, d), self.below(7) as i32 - 3),
            _ => format!("{} as u8 as {n}", self.expr(T::Bool, d)),
        }
    }

    fn bool_expr(&mut self, d: u32) -> String {
        let t = *self.pick(&[T::I32, T::U32, T::F32, T::F64]);
        match self.below(8) {
            0 => format!("{} < {}", self.expr(t, d), self.expr(t, d)),
            1 => format!("{} >= {}", self.expr(t, d), self.expr(t, d)),
            2 => format!("{} == {}", self.expr(t, d), self.expr(t, d)),
            3 => format!("!{}", self.expr(T::Bool, d)),
            4 => format!("{} && {}", self.expr(T::Bool, d), self.expr(T::Bool, d)),
            5 => format!("{} || {}", self.expr(T::Bool, d), self.expr(T::Bool, d)),
            6 => {
                let f = *self.pick(&[T::F32, T::F64]);
                format!("{}.is_nan()", self.expr(f, d))
            }
            _ => format!("{} != {}", self.expr(t, d), self.expr(t, d)),
        }
    }

    /// `name = <expr of its type>` (compound for numbers), for a random mutable local.
    fn assign(&mut self, d: u32) -> String {
        let (name, t) = self.pick(&self.muts.clone()).clone();
        let e = self.expr(t, d);
        match (t, self.below(3)) {
            (T::Bool, _) => format!("{name} = {e};"),
            (T::I32 | T::U32, 0) => format!("{name} ^= {e};"),
            (_, 1) => format!("{name} += {e};"),
            _ => format!("{name} = {e};"),
        }
    }

    fn stmts(&mut self, depth: u32, n: usize) -> String {
        let mut s = String::new();
        for _ in 0..n {
            let line = match self.below(if depth == 0 { 2 } else { 6 }) {
                0 | 1 => self.assign(3),
                2 => {
                    let k = self.fresh();
                    let t = *self.pick(&[T::I32, T::U32]);
                    let bound = 1 + self.below(6);
                    let kv = format!("({k} as {})", t.name());
                    self.vars.push((kv, t));
                    let body = self.stmts(depth - 1, 2);
                    self.vars.pop();
                    format!("for {k} in 0..{bound}usize {{ {body} }}")
                }
                3 => {
                    let c = self.expr(T::Bool, 2);
                    let a = self.stmts(depth - 1, 2);
                    let b = self.stmts(depth - 1, 1);
                    format!("if {c} {{ {a} }} else {{ {b} }}")
                }
                4 => {
                    let w = self.fresh();
                    let bound = 1 + self.below(5);
                    let body = self.stmts(depth - 1, 2);
                    format!("let mut {w} = 0u32; while {w} < {bound} {{ {body} {w} += 1; }}")
                }
                _ => {
                    // a local array, filled in a loop over its length, read at a reduced
                    // index
                    let arr = self.fresh();
                    let k = self.fresh();
                    let t = *self.pick(&[T::I32, T::U32, T::F32, T::F64]);
                    let len = 1 + self.below(9);
                    let zero = self.lit(t);
                    self.vars.push((format!("({k} as {})", t.name()), t));
                    let fill = self.expr(t, 2);
                    self.vars.pop();
                    let (target, tt) = self.pick(&self.muts.clone()).clone();
                    let read = if tt == T::Bool {
                        format!(
                            "{target} = {arr}[({} as usize) % {arr}.len()] == {zero};",
                            self.expr(T::U32, 2)
                        )
                    } else {
                        format!(
                            "{target} = {arr}[({} as usize) % {arr}.len()] as {};",
                            self.expr(T::U32, 2),
                            tt.name()
                        )
                    };
                    format!(
                        "let mut {arr} = [{zero}; {len}]; \
                         for {k} in 0..{arr}.len() {{ {arr}[{k}] = {fill}; }} {read}"
                    )
                }
            };
            s.push_str(&line);
            s.push('\n');
        }
        s
    }

    fn function(&mut self, name: &str) -> String {
        self.vars = vec![
            ("(i as u32)".into(), T::U32),
            ("a".into(), T::I32),
            ("b".into(), T::U32),
            ("x".into(), T::F32),
            ("y".into(), T::F64),
        ];
        let mut lets = String::new();
        for t in [T::I32, T::U32, T::F32, T::F64, T::Bool] {
            let v = self.fresh();
            let e = self.expr(t, 3);
            lets.push_str(&format!("let mut {v}: {} = {e};\n", t.name()));
            self.vars.push((v.clone(), t));
            self.muts.push((v, t));
        }
        let n = 3 + self.below(4) as usize;
        let body = self.stmts(2, n);
        let m = self.muts.clone();
        let get = |t: T| m.iter().find(|(_, vt)| *vt == t).unwrap().0.clone();
        format!(
            "#[userfn]\n#[allow(unused_parens, unused_mut, unused_variables, clippy::all)]\n\
             pub fn {name}(#[index] i: usize, ti: &[i32], tf: &[f32], a: i32, b: u32, x: f32, y: f64) \
             -> (f64, i64, f32, u32) {{\n{lets}{body}\
             ({}, ({} as i64) ^ (({} as i64) << 40), {}, {})\n}}\n",
            get(T::F64),
            get(T::I32),
            get(T::Bool),
            get(T::F32),
            get(T::U32)
        )
    }
}

#[cfg(test)]
mod tests {
    /// Bodies are drawn from the seed alone, and each is a well-formed function.
    #[test]
    fn the_same_seed_draws_the_same_bodies() {
        let draw = |seed: u64| super::Gen::new(seed).function("fz_0");
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        let f = draw(7);
        assert!(
            f.starts_with("#[userfn]") && f.contains("pub fn fz_0("),
            "{f}"
        );
        assert_eq!(f.matches('{').count(), f.matches('}').count(), "{f}");
    }
}
