//! `SKEL_CHECK=0` makes skeletons without `.checked(..)` run unchecked, even in this debug
//! build; `.checked(true)` still checks. (Its own test binary: the variable is read once per
//! process.)

mod common;

use skel::prelude::*;

#[userfn]
fn ratio(a: i32, b: i32) -> i32 {
    a / b
}

#[test]
fn skel_check_0_sets_the_default_and_checked_overrides_it() {
    std::env::set_var("SKEL_CHECK", "0");
    let (a, b) = (Vector::from(vec![7, 8]), Vector::from(vec![1, 0]));
    let mut q = Vector::filled(2, 5);
    // the host backends check in every mode
    for be in [Backend::Cpu, Backend::Rayon] {
        let err = Map::new(ratio).backend(be).run(&a, &b, &mut q).unwrap_err();
        assert!(matches!(err, Error::UserFunction { .. }), "{be}: {err}");
    }
    if !common::available(Backend::OpenCl) {
        return;
    }
    // unchecked on a device: a division by zero is 0, no error
    Map::new(ratio)
        .backend(Backend::OpenCl)
        .run(&a, &b, &mut q)
        .unwrap();
    assert_eq!(q.to_vec(), vec![7, 0]);
    let err = Map::new(ratio)
        .backend(Backend::OpenCl)
        .checked(true)
        .run(&a, &b, &mut q)
        .unwrap_err();
    assert!(err.to_string().contains("division of 8 by zero"), "{err}");
    assert_eq!(
        q.to_vec(),
        vec![7, 0],
        "the faulted call left the output as it was"
    );
    // every skeleton: unchecked by default, checked when asked
    let mut s = Vector::filled(2, 5);
    let scan = || Scan::new(ratio).backend(Backend::OpenCl);
    scan().run(&b, &mut s).unwrap();
    assert_eq!(s.to_vec(), vec![1, 0], "1 / 0 is 0 unchecked");
    let err = scan().checked(true).run(&b, &mut s).unwrap_err();
    assert!(err.to_string().contains("division of 1 by zero"), "{err}");
    assert_eq!(s.to_vec(), vec![1, 0], "the faulted call left the output");
    let v = Vector::from(vec![1, 2, 3]);
    let mut o = Vector::filled(3, 0);
    let reach = || MapOverlap::new(far, 1).backend(Backend::OpenCl);
    let err = reach().checked(true).run(&v, &mut o).unwrap_err();
    assert!(err.to_string().contains("window offset 2"), "{err}");
    assert_eq!(o.to_vec(), vec![0; 3], "the faulted call left the output");
}

#[userfn]
fn far(w: Window<i32>) -> i32 {
    w[2]
}
