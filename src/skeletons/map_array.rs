//! MapArray: a Map whose function also reads one whole array.

use std::marker::PhantomData;

use super::{check_index_dims, check_inputs, common_options, uniforms_or_missing, Options};
use crate::backends;
use crate::containers::{Input, Output, Source};
use crate::plan::{self, ArgTuple};
use crate::userfn::{ArrayFn, IndexKind};
use crate::{DeviceType, Result};

/// `out[i] = f(array, a[i], ..)`: every element sees the whole `array` (a lookup table,
/// a small matrix of coefficients, ...), as SkePU's MapArray.
///
/// ```
/// use skel::prelude::*;
/// #[userfn]
/// fn lookup(table: &[f32], x: u32) -> f32 { table[x as usize] }
///
/// let table = Vector::from(vec![10.0f32, 20.0, 30.0]);
/// let idx = Vector::from(vec![2u32, 0, 1, 2]);
/// let mut out = Vector::zeroed(4);
/// MapArray::new(lookup).run(&table, &idx, &mut out)?;
/// assert_eq!(out.to_vec(), vec![30.0, 10.0, 20.0, 30.0]);
/// # Ok::<(), skel::Error>(())
/// ```
#[must_use = "a skeleton does nothing until one of its `run` methods is called"]
#[derive(Clone, Copy, Debug)]
pub struct MapArray<F: ArrayFn, E = <F as ArrayFn>::Elems> {
    f: F,
    uniforms: Option<F::Uniforms>,
    options: Options,
    elems: PhantomData<fn() -> E>,
}

impl<F: ArrayFn> MapArray<F, F::Elems> {
    /// A MapArray of `f`.
    pub fn new(f: F) -> Self {
        MapArray {
            f,
            uniforms: None,
            options: Options::default(),
            elems: PhantomData,
        }
    }
}

impl<F: ArrayFn, E> MapArray<F, E> {
    /// Binds the `#[uniform]` parameters, as a tuple in declaration order.
    pub fn uniforms(
        mut self,
        uniforms: <F::Uniforms as crate::userfn::UniformTuple>::User,
    ) -> Self {
        self.uniforms = Some(crate::userfn::UniformTuple::from_user(uniforms));
        self
    }

    common_options!();

    /// The user function.
    pub fn function(&self) -> F {
        self.f
    }

    fn execute<'a, I>(
        &self,
        array: &impl Input<F::Array>,
        inputs: I,
        out: &mut impl Output<F::Out>,
    ) -> Result<()>
    where
        I: ArgTuple<'a, Elems = F::Elems>,
    {
        self.options.validate()?;
        let uniforms = &uniforms_or_missing(F::NAME, &self.uniforms, &self.options)?;
        let plan = plan::MapArray::<(F, I)> {
            array: array.arg(),
            inputs,
            out: out.arg_mut(),
            uniforms,
        };
        backends::map_array(self.options, array, plan, |plan| {
            check_inputs("MapArray", &plan.inputs.shapes(), plan.out.shape())?;
            check_index_dims(
                "MapArray",
                F::NAME,
                <F::Index as IndexKind>::DIMS,
                plan.out.shape(),
            )
        })
    }
}

impl<F: ArrayFn<Elems = ()>> MapArray<F, ()> {
    /// Runs a function with only `#[index]` and the array over every position of `out`.
    pub fn run_index(
        &self,
        array: &impl Input<F::Array>,
        out: &mut impl Output<F::Out>,
    ) -> Result<()> {
        self.execute(array, (), out)
    }
}

macro_rules! map_array_run {
    ($(($($t:ident $a:ident),+))*) => {$(
        impl<F, $($t: DeviceType),+> MapArray<F, ($($t,)+)>
        where
            F: ArrayFn<Elems = ($($t,)+)>,
        {
            /// Runs the map: the shared array, one input per element parameter, the output.
            pub fn run(
                &self,
                array: &impl Input<F::Array>,
                $($a: &impl Source<$t>,)+
                out: &mut impl Output<F::Out>,
            ) -> Result<()> {
                $(let $a = $a.resolve(self.options.backend)?;)+
                self.execute(array, ($($a.arg(),)+), out)
            }
        }
    )*};
}

map_array_run! {
    (A a)
    (A a, B b)
    (A a, B b, C c)
}
