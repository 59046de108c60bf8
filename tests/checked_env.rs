//! `SKEL_CHECK=0` makes skeletons without `.checked(..)` run unchecked, even in this debug
//! build; `.checked(true)` still checks. (Its own test binary: the variable is read once per
//! process.) And the rules of `skel::config` that need a fresh process: a malformed variable
//! is the error of the first call, whichever variable it is, and code wins over it.

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
    // The OpenCL device is open: the setting that chose it is fixed now, and says so.
    let err = skel::config::OPENCL_DEVICE
        .set(Some("another device".into()))
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("SKEL_OPENCL_DEVICE") && m.contains("first OpenCL use")),
        "{err}"
    );
    skel::config::OPENCL_DEVICE.set(None).unwrap(); // the value in use: no change
}

#[userfn]
fn far(w: Window<i32>) -> i32 {
    w[2]
}

#[userfn]
fn twice(x: i32) -> i32 {
    x * 2
}

/// Runs the ignored test `name` of this binary in a child process with `env` (and no
/// `SKEL_CHECK` from the test above); whether it passed, and its output.
fn child(name: &str, env: &[(&str, &str)]) -> (bool, String) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            name,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env_remove("SKEL_CHECK")
        .env("SKEL_CONFIG_CHILD", name)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success() && text.contains("1 passed"), text)
}

fn is_child(name: &str) -> bool {
    std::env::var("SKEL_CONFIG_CHILD").is_ok_and(|c| c == name)
}

#[test]
fn a_malformed_variable_is_the_error_of_the_first_call_whichever_it_is() {
    for (var, value) in [
        ("SKEL_CHECK", "maybe"),
        ("SKEL_BACKEND", "gpu"),
        ("SKEL_STREAMS", "0"),
        ("SKEL_PAGEABLE", "2"),
        ("SKEL_CUDA_DEVICES", "0,,1"),
        ("SKEL_CUDA_DEVICE", "first"),
        ("SKEL_JIT_LOG", "loud"),
        ("SKEL_LAUNCH", "fast"),
        ("SKEL_SCAN_TUNE", "100,64"),
        ("SKEL_SCAN_PACKED", "-1"),
        ("SKEL_OPENCL_TUNE", "wg=100"),
    ] {
        let (ok, out) = child(
            "child_malformed",
            &[
                (var, value),
                ("SKEL_TEST_VAR", var),
                ("SKEL_TEST_VALUE", value),
            ],
        );
        assert!(ok, "{var}={value}:\n{out}");
    }
}

#[test]
#[ignore = "run as a child process by a_malformed_variable_is_the_error_of_the_first_call_whichever_it_is"]
fn child_malformed() {
    if !is_child("child_malformed") {
        return;
    }
    let var = std::env::var("SKEL_TEST_VAR").unwrap();
    let value = std::env::var("SKEL_TEST_VALUE").unwrap();
    // Allocating cannot fail: a malformed SKEL_PAGEABLE is the default there (and logged).
    let a = Vector::from(vec![1, 2]);
    let mut out = Vector::filled(2, 0);
    let call = |out: &mut Vector<i32>| Map::new(twice).backend(Backend::Cpu).run(&a, out);
    for _ in 0..2 {
        match call(&mut out).unwrap_err() {
            Error::InvalidArgument(m) => assert!(
                m.contains(&var) && m.contains(&format!("{value:?}")) && m.contains("expected"),
                "{m}"
            ),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(out.to_vec(), vec![0, 0], "no call ran");
    assert!(skel::config::validate().is_err());
}

#[test]
fn code_wins_over_a_malformed_or_a_valid_environment() {
    let (ok, out) = child("child_code_wins", &[("SKEL_CHECK", "maybe")]);
    assert!(ok, "{out}");
    let (ok, out) = child("child_code_wins_valid", &[("SKEL_CHECK", "OFF")]);
    assert!(ok, "{out}");
}

#[test]
#[ignore = "run as a child process by code_wins_over_a_malformed_or_a_valid_environment"]
fn child_code_wins() {
    use skel::config::{Source, CHECK};
    if !is_child("child_code_wins") {
        return;
    }
    let a = Vector::from(vec![1, 2]);
    let mut out = Vector::filled(2, 0);
    let call = |out: &mut Vector<i32>| Map::new(twice).backend(Backend::Cpu).run(&a, out);
    assert!(call(&mut out).is_err());
    assert_eq!(CHECK.source(), Source::Environment);
    CHECK.set(true).unwrap();
    call(&mut out).unwrap();
    assert_eq!(out.to_vec(), vec![2, 4]);
    // Back to the environment: the error again.
    CHECK.unset().unwrap();
    assert!(matches!(call(&mut out), Err(Error::InvalidArgument(_))));
}

#[test]
#[ignore = "run as a child process by code_wins_over_a_malformed_or_a_valid_environment"]
fn child_code_wins_valid() {
    use skel::config::{Source, CHECK};
    if !is_child("child_code_wins_valid") {
        return;
    }
    assert_eq!(
        (CHECK.get().unwrap(), CHECK.source()),
        (false, Source::Environment)
    );
    CHECK.set(true).unwrap();
    assert_eq!((CHECK.get().unwrap(), CHECK.source()), (true, Source::Code));
    CHECK.unset().unwrap();
    assert!(!CHECK.get().unwrap());
}
