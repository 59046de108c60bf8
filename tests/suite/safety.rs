//! Memory safety and the same answer everywhere (issue 23): every host-side call of a user
//! function inside a skeleton (a device's `.start(v)` fold, partial merges) is an
//! `Err(UserFunction)` naming the function that failed; `clamp` faults alike on every
//! backend.

use skel::prelude::*;

use super::available;

const BACKENDS: [Backend; 4] = [Backend::Cpu, Backend::Rayon, Backend::OpenCl, Backend::Cuda];

fn backends() -> impl Iterator<Item = Backend> {
    BACKENDS.into_iter().filter(|&b| available(b))
}

/// `max`, but a negative left operand (only ever the start value here) is a `clamp` with
/// `min > max`: on a device that fold is the host's, after the kernels.
#[userfn]
pub fn max_from_positive(a: i64, b: i64) -> i64 {
    let hi = if a < 0 { 0 } else { i64::MAX };
    a.max(b).clamp(1, hi)
}

#[userfn]
pub fn plus_one(x: i64) -> i64 {
    x + 1
}

/// `(function, what)` of an `Err(UserFunction)`; fails on anything else.
#[track_caller]
fn user_fault<T: std::fmt::Debug>(be: Backend, r: Result<T>) -> (String, String) {
    match r {
        Err(Error::UserFunction { function, what, .. }) => (function, what),
        other => panic!("{be}: expected Err(UserFunction), got {other:?}"),
    }
}

#[test]
fn a_fault_in_the_start_fold_is_an_err_naming_the_function() {
    let v = Vector::from_fn(100_003, |i| (i % 1000) as i64 + 1);
    for be in backends() {
        for checked in [true, false] {
            let r = Reduce::new(max_from_positive)
                .backend(be)
                .checked(checked)
                .start(-1)
                .run(&v);
            let (function, what) = user_fault(be, r);
            assert_eq!(function, "max_from_positive", "{be} checked={checked}");
            assert!(what.contains("min > max"), "{be}: {what}");
            // a start the function takes: the same value everywhere
            let ok = Reduce::new(max_from_positive)
                .backend(be)
                .checked(checked)
                .start(3)
                .run(&v)
                .unwrap();
            assert_eq!(ok, 1000, "{be}");
        }
    }
}

#[test]
fn a_fault_in_the_reduce_function_of_map_reduce_names_it() {
    let v = Vector::from_fn(100_003, |i| (i % 1000) as i64);
    for be in backends() {
        for checked in [true, false] {
            let r = MapReduce::new(plus_one, max_from_positive)
                .backend(be)
                .checked(checked)
                .start(-5)
                .run(&v);
            let (function, what) = user_fault(be, r);
            assert_eq!(
                function, "max_from_positive",
                "{be} checked={checked}: {what}"
            );
            let ok = MapReduce::new(plus_one, max_from_positive)
                .backend(be)
                .checked(checked)
                .start(0)
                .run(&v)
                .unwrap();
            assert_eq!(ok, 1000, "{be}");
        }
    }
}
