//! ReduceByKey: `sums[k]` = the merge of the values whose key is `k`, key and value
//! computed per element by a user function.

use std::marker::PhantomData;

use super::{
    check_arrays, check_index_dims, check_inputs, common_options, uniforms_or_missing, Options,
};
use crate::backends::{self, BinaryFn};
use crate::containers::{Input, Output, Shape};
use crate::plan::{self, ArgTuple};
use crate::userfn::{BindArrays, ContainerArgs, ElementwiseFn, IndexKind, UserFn};
use crate::{DeviceType, Error, Result};

/// Reduces the elements' values per key into a table: `keyval(inputs[i]..)` returns
/// `(key, value)`, and `sums[k]` becomes the merge, starting from `V::default()`, of the
/// values whose key is `k` (Thrust's `reduce_by_key` without the sort, Kokkos'
/// `ScatterView`; the per-cluster sums of k-means).
///
/// `keyval` takes what a [`crate::Map`]'s function does (1..=4 inputs of one shape,
/// `#[index]`, container arguments through `.arrays(..)`, `#[uniform]`s) and returns a
/// `(u32, V)` tuple; `merge` is a `#[userfn] fn(V, V) -> V` that must be **associative and
/// commutative**: the backends merge in different orders (per thread, per block, then the
/// blocks' tables). `sums` (a `Vector<V>`, one element per key) is **overwritten**. A key
/// outside `0..sums.len()` is dropped; a checked call returns [`Error::UserFunction`]
/// instead and leaves `sums` as it was.
///
/// **Floats**: integer values (counts, integer sums) are exact and the same on every
/// backend. Float sums are merged in another order on each backend (and from run to run on
/// the GPUs, where the order within a block depends on scheduling), so they may differ from
/// the `cpu` backend's by rounding, as any reassociated float sum does.
///
/// The GPU backends group each block's tile by key in shared (local) memory with an integer
/// counting sort and merge each key's run into the block's table, one thread per key (no
/// atomics on the values, so `V` may be any struct); the blocks' tables are merged by a
/// second kernel. The table lives in shared memory where it fits, else in global memory.
///
/// ```
/// use skel::prelude::*;
///
/// #[derive(Clone, Copy, Debug, Default, PartialEq, DeviceType)]
/// #[repr(C)]
/// struct Acc { x: f32, n: u32 }
///
/// #[userfn]
/// fn nearest(p: f32, centres: &[f32]) -> (u32, Acc) {
///     let mut best = 0u32;
///     for k in 0..centres.len() {
///         if (p - centres[k]).abs() < (p - centres[best as usize]).abs() {
///             best = k as u32;
///         }
///     }
///     (best, Acc { x: p, n: 1 })
/// }
///
/// #[userfn]
/// fn merge(a: Acc, b: Acc) -> Acc { Acc { x: a.x + b.x, n: a.n + b.n } }
///
/// let points = Vector::from(vec![0.0f32, 1.0, 9.0, 10.0, 11.0]);
/// let centres = Vector::from(vec![0.5f32, 10.0]);
/// let mut sums = Vector::zeroed(2);
/// ReduceByKey::new(nearest, merge).arrays((&centres,)).run(&points, &mut sums)?;
/// assert_eq!(sums.to_vec(), vec![Acc { x: 1.0, n: 2 }, Acc { x: 30.0, n: 3 }]);
/// # Ok::<(), skel::Error>(())
/// ```
#[must_use = "a skeleton does nothing until one of its `run` methods is called"]
#[derive(Clone, Copy, Debug)]
pub struct ReduceByKey<F: ElementwiseFn, R, V, E = <F as ElementwiseFn>::Elems, A = ()> {
    keyval: F,
    merge: R,
    uniforms: Option<F::Uniforms>,
    options: Options,
    elems: PhantomData<fn() -> (E, V)>,
    arrays: A,
}

impl<F, R, V> ReduceByKey<F, R, V, F::Elems>
where
    F: ElementwiseFn + UserFn<Out = (u32, V)>,
    R: BinaryFn<V>,
    V: DeviceType + Default,
{
    /// A ReduceByKey of the `(key, value)`s `keyval` computes, merged with `merge`.
    pub fn new(keyval: F, merge: R) -> Self {
        ReduceByKey {
            keyval,
            merge,
            uniforms: None,
            options: Options::default(),
            elems: PhantomData,
            arrays: (),
        }
    }
}

impl<F, R, V, E, A> ReduceByKey<F, R, V, E, A>
where
    F: ElementwiseFn + UserFn<Out = (u32, V)>,
    R: BinaryFn<V>,
    V: DeviceType + Default,
{
    /// Binds the key function's `#[uniform]` parameters, as a tuple in declaration order.
    pub fn uniforms(
        mut self,
        uniforms: <F::Uniforms as crate::userfn::UniformTuple>::User,
    ) -> Self {
        self.uniforms = Some(crate::userfn::UniformTuple::from_user(uniforms));
        self
    }

    /// Binds the key function's container parameters (`Mat<T>`, `&[T]`), in declaration
    /// order, as for [`crate::Map::arrays`] (the centres of k-means).
    pub fn arrays<B: BindArrays<F::Arrays>>(self, arrays: B) -> ReduceByKey<F, R, V, E, B> {
        ReduceByKey {
            keyval: self.keyval,
            merge: self.merge,
            uniforms: self.uniforms,
            options: self.options,
            elems: PhantomData,
            arrays,
        }
    }

    common_options!();

    /// The key and merge functions.
    pub fn functions(&self) -> (F, R) {
        (self.keyval, self.merge)
    }

    fn execute<'a, I>(&self, inputs: I, sums: &mut impl Output<V>) -> Result<()>
    where
        I: ArgTuple<'a, Elems = F::Elems>,
        A: BindArrays<F::Arrays>,
    {
        self.options.validate()?;
        let uniforms = &uniforms_or_missing(F::NAME, &self.uniforms, &self.options)?;
        let shapes = inputs.shapes();
        let plan = plan::ReduceByKey::<(F, R, I, V)> {
            arrays: self.arrays.bind(),
            inputs,
            // The first input's shape, which `checks` confirm is every input's.
            shape: shapes.first().copied().unwrap_or(Shape::Vector(0)),
            sums: sums.arg_mut(),
            uniforms,
        };
        backends::reduce_by_key(self.options, plan, |plan| {
            let what = "ReduceByKey";
            check_arrays(what, F::NAME, F::Arrays::KINDS, &plan.arrays.shapes())?;
            check_inputs(what, &shapes, plan.shape)?;
            check_index_dims(what, F::NAME, <F::Index as IndexKind>::DIMS, plan.shape)?;
            match plan.sums.shape() {
                Shape::Vector(0) => Err(Error::InvalidArgument(format!(
                    "ReduceByKey of `{}`: the sums vector is empty; its length is the \
                     number of keys",
                    F::NAME
                ))),
                Shape::Vector(k) if k > i32::MAX as usize => Err(Error::InvalidArgument(format!(
                    "ReduceByKey of `{}`: {k} keys, at most {}",
                    F::NAME,
                    i32::MAX
                ))),
                Shape::Vector(_) => Ok(()),
                other => Err(Error::shape(
                    "ReduceByKey sums (one vector, one element per key)",
                    "a vector",
                    other,
                )),
            }
        })
    }
}

macro_rules! reduce_by_key_run {
    ($(($($t:ident $a:ident),+))*) => {$(
        impl<F, R, V, Bound, $($t: DeviceType),+> ReduceByKey<F, R, V, ($($t,)+), Bound>
        where
            F: ElementwiseFn<Elems = ($($t,)+)> + UserFn<Out = (u32, V)>,
            R: BinaryFn<V>,
            V: DeviceType + Default,
            Bound: BindArrays<F::Arrays>,
        {
            /// Merges the values of the inputs (one per element parameter, all of one
            /// shape) per key into `sums` (one element per key), which is overwritten.
            pub fn run(&self, $($a: &impl Input<$t>,)+ sums: &mut impl Output<V>) -> Result<()> {
                self.execute(($($a.arg(),)+), sums)
            }
        }
    )*};
}

reduce_by_key_run! {
    (A a)
    (A a, B b)
    (A a, B b, C c)
    (A a, B b, C c, D d)
}
