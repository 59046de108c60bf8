//! Public behaviour of the containers (host side; no skeletons involved).

use proptest::prelude::*;
use skel::containers::{Input, Output, Shape};
use skel::prelude::*;

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn containers_are_send_and_sync() {
    assert_send_sync::<Vector<f32>>();
    assert_send_sync::<Matrix<u8>>();
    assert_send_sync::<skel::VectorView<'static, f64>>();
    assert_send_sync::<skel::VectorViewMut<'static, i32>>();
}

#[test]
fn constructors_agree() {
    let a = Vector::from(vec![0u32, 1, 2, 3]);
    let b = Vector::from_vec(vec![0u32, 1, 2, 3]);
    let c = Vector::from_fn(4, |i| i as u32);
    let d: Vector<u32> = (0..4).collect();
    let e = Vector::pageable(vec![0u32, 1, 2, 3]);
    let f = Vector::from(&[0u32, 1, 2, 3][..]);
    for v in [&b, &c, &d, &e, &f] {
        assert_eq!(&a, v);
    }
    assert_eq!(Vector::<i64>::zeroed(3).to_vec(), vec![0; 3]);
    assert_eq!(Vector::filled(2, -1i8).to_vec(), vec![-1, -1]);
    assert_ne!(a, Vector::from(vec![0u32, 1, 2]));
}

#[test]
fn host_memory_is_aligned() {
    for n in [1usize, 3, 17, 1000, 100_000] {
        let v = Vector::<f32>::zeroed(n);
        assert_eq!(v.as_slice().as_ptr() as usize % 64, 0, "n = {n}");
        let m = Matrix::<u8>::zeroed(n, 3);
        assert_eq!(m.as_slice().as_ptr() as usize % 64, 0, "n = {n}");
    }
    assert_eq!(
        Vector::pageable(vec![0u8; 1 << 20]).as_slice().as_ptr() as usize % 4096,
        0
    );
}

#[test]
fn pinned_needs_a_device_and_pageable_always_works() {
    let p = Vector::pageable(vec![1.0f32; 16]);
    assert!(!p.is_pinned());
    match Vector::pinned(vec![1.0f32; 16]) {
        Ok(v) => {
            assert!(v.is_pinned());
            assert_eq!(v, p);
        }
        Err(e) => {
            assert!(matches!(e, Error::BackendUnavailable { .. }), "{e}");
            assert!(e.to_string().contains("pinned"), "{e}");
            // No pinned allocator: defaults are pageable.
            assert!(!Vector::from(vec![1u8]).is_pinned());
        }
    }
}

#[test]
fn empty_containers() {
    let v: Vector<f64> = Vector::zeroed(0);
    assert!(v.is_empty());
    assert_eq!(v.as_slice(), &[] as &[f64]);
    assert_eq!(v.iter().count(), 0);
    assert_eq!(v.clone(), v);
    assert!(v.view(..).is_empty());
    let m: Matrix<u8> = Matrix::zeroed(0, 5);
    assert!(m.is_empty());
    assert_eq!((m.rows(), m.cols()), (0, 5));
    let m = Matrix::from_fn(3, 0, |_, _| 1u8);
    assert_eq!(m.len(), 0);
    assert_eq!(m.row(2), &[] as &[u8]);
    assert_eq!(format!("{m:?}"), "Matrix(3x0, [[], [], []])");
}

#[test]
fn mutation_and_clone_independence() {
    let mut a = Vector::from_fn(10, |i| i as i32);
    a[3] = 30;
    a.as_mut_slice()[9] = 90;
    let b = a.clone();
    a[0] = -1;
    assert_eq!(b[0], 0);
    assert_eq!(b[3], 30);
    assert_eq!(b[9], 90);
    assert_eq!(a.to_vec(), vec![-1, 1, 2, 30, 4, 5, 6, 7, 8, 90]);
    let sum: i32 = (&a).into_iter().sum();
    assert_eq!(sum, a.iter().sum::<i32>());
}

#[test]
fn views_read_and_write_their_range() {
    let mut v = Vector::from_fn(10, |i| i as u16);
    {
        let w = v.view(2..6);
        assert_eq!(w.len(), 4);
        assert_eq!(w.as_slice(), &[2, 3, 4, 5]);
        assert_eq!(w[3], 5);
        assert_eq!(w.arg().shape(), Shape::Vector(4));
        let w2 = w.clone();
        assert_eq!(w2.to_vec(), w.to_vec());
        assert_eq!(v.view(..=1).to_vec(), vec![0, 1]);
        assert_eq!(v.view(7..).to_vec(), vec![7, 8, 9]);
    }
    {
        let mut w = v.view_mut(4..8);
        assert_eq!(w.len(), 4);
        assert_eq!(w.arg_mut().shape(), Shape::Vector(4));
        assert_eq!(w.arg().shape(), Shape::Vector(4));
        w[0] = 40;
        w.as_mut_slice()[3] = 70;
        assert_eq!(w.as_slice(), &[40, 5, 6, 70]);
    }
    assert_eq!(v.to_vec(), vec![0, 1, 2, 3, 40, 5, 6, 70, 8, 9]);
    assert_eq!(v.arg().shape(), Shape::Vector(10));
    assert_eq!(format!("{:?}", v.view(8..)), "VectorView(8..10, [8, 9])");
}

#[test]
#[should_panic(expected = "out of range")]
fn view_past_the_end_panics() {
    let v = Vector::filled(4, 0u8);
    let _ = v.view(2..5);
}

#[test]
#[should_panic(expected = "starts at 3 but ends at 2")]
#[allow(clippy::reversed_empty_ranges)]
fn decreasing_view_panics() {
    let mut v = Vector::filled(4, 0u8);
    let _ = v.view_mut(3..2);
}

#[test]
#[should_panic(expected = "index out of bounds: the len is 3 but the index is 3")]
fn index_past_the_end_panics() {
    let v = Vector::filled(3, 0u8);
    let _ = v[3];
}

#[test]
#[should_panic(expected = "index out of bounds")]
fn view_index_is_relative_and_checked() {
    let v = Vector::filled(10, 0u8);
    let w = v.view(0..2);
    let _ = w[2];
}

#[test]
fn matrix_basics() {
    let mut m = Matrix::from_vec(2, 3, vec![1, 2, 3, 4, 5, 6]).unwrap();
    assert_eq!((m.rows(), m.cols(), m.len()), (2, 3, 6));
    assert_eq!(m.row(0), &[1, 2, 3]);
    assert_eq!(m.row(1), &[4, 5, 6]);
    assert_eq!(m[(1, 2)], 6);
    m[(0, 0)] = 10;
    m.row_mut(1)[0] = 40;
    m.as_mut_slice()[5] = 60;
    assert_eq!(m.to_vec(), vec![10, 2, 3, 40, 5, 60]);
    assert_eq!(
        m,
        Matrix::from_vec(2, 3, vec![10, 2, 3, 40, 5, 60]).unwrap()
    );
    assert_ne!(
        m,
        Matrix::from_vec(3, 2, vec![10, 2, 3, 40, 5, 60]).unwrap()
    );
    let c = m.clone();
    m[(0, 1)] = 0;
    assert_eq!(c[(0, 1)], 2);
    assert_eq!(m.arg().shape(), Shape::Matrix { rows: 2, cols: 3 });
    assert_eq!(m.arg_mut().shape().to_string(), "2x3 matrix");
    assert_eq!(
        Matrix::from_fn(2, 2, |r, c| (r * 10 + c) as u8).to_vec(),
        vec![0, 1, 10, 11]
    );
    assert_eq!(Matrix::filled(1, 2, 7u8).to_vec(), vec![7, 7]);
    assert_eq!(format!("{c:?}"), "Matrix(2x3, [[10, 2, 3], [40, 5, 60]])");
}

#[test]
fn matrix_from_vec_names_both_shapes() {
    let err = Matrix::from_vec(2, 3, vec![0f32; 5]).unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch { .. }));
    let msg = err.to_string();
    assert!(
        msg.contains("2x3") && msg.contains('6') && msg.contains('5'),
        "{msg}"
    );
    let err = Matrix::from_vec(usize::MAX, 2, vec![0u8; 2]).unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
}

#[test]
#[should_panic(expected = "index (0, 3) out of bounds for a 2x3 matrix")]
fn matrix_column_past_the_end_panics() {
    // (0, 3) is flat index 3, inside the storage: must still panic.
    let m: Matrix<u8> = Matrix::zeroed(2, 3);
    let _ = m[(0, 3)];
}

#[test]
#[should_panic(expected = "row index 2 out of range for a 2x3 matrix")]
fn matrix_row_past_the_end_panics() {
    let m: Matrix<u8> = Matrix::zeroed(2, 3);
    let _ = m.row(2);
}

#[test]
fn concurrent_shared_reads() {
    let v = Vector::from_fn(10_000, |i| i as u64);
    let m = Matrix::from_fn(100, 100, |r, c| (r * 100 + c) as u64);
    std::thread::scope(|s| {
        for t in 0..4 {
            let (v, m) = (&v, &m);
            s.spawn(move || {
                let w = v.view(t * 2500..(t + 1) * 2500);
                assert_eq!(w[0], (t * 2500) as u64);
                assert_eq!(v.as_slice().iter().sum::<u64>(), 49_995_000);
                assert_eq!(m.row(t)[99], (t * 100 + 99) as u64);
            });
        }
    });
}

#[derive(Clone, Debug)]
enum Op {
    Set(usize, i32),
    FillView(usize, usize, i32),
    ViewIndex(usize, usize, usize, i32),
    CloneAndCompare,
    Read(usize, usize),
}

fn ops(n: usize) -> impl Strategy<Value = Vec<Op>> {
    let idx = 0..n.max(1);
    let rng = (0..=n, 0..=n).prop_map(|(a, b)| (a.min(b), a.max(b)));
    prop::collection::vec(
        prop_oneof![
            (idx.clone(), any::<i32>()).prop_map(|(i, x)| Op::Set(i, x)),
            (rng.clone(), any::<i32>()).prop_map(|((a, b), x)| Op::FillView(a, b, x)),
            (rng.clone(), idx, any::<i32>()).prop_map(|((a, b), i, x)| Op::ViewIndex(a, b, i, x)),
            Just(Op::CloneAndCompare),
            rng.prop_map(|(a, b)| Op::Read(a, b)),
        ],
        0..30,
    )
}

proptest! {
    /// Host-side operations on a Vector behave like the same operations on a Vec.
    #[test]
    fn vector_matches_vec_model((n, ops) in (0usize..40).prop_flat_map(|n| (Just(n), ops(n)))) {
        let mut v = Vector::from_fn(n, |i| i as i32);
        let mut model: Vec<i32> = (0..n as i32).collect();
        for op in ops {
            match op {
                Op::Set(i, x) if i < n => {
                    v[i] = x;
                    model[i] = x;
                }
                Op::Set(..) => {}
                Op::FillView(a, b, x) => {
                    v.view_mut(a..b).as_mut_slice().fill(x);
                    model[a..b].fill(x);
                }
                Op::ViewIndex(a, b, i, x) => {
                    if i < b - a {
                        v.view_mut(a..b)[i] = x;
                        model[a + i] = x;
                    }
                }
                Op::CloneAndCompare => {
                    let c = v.clone();
                    prop_assert_eq!(c.to_vec(), model.clone());
                }
                Op::Read(a, b) => {
                    prop_assert_eq!(v.view(a..b).as_slice(), &model[a..b]);
                }
            }
            prop_assert_eq!(v.as_slice(), &model[..]);
        }
    }
}
