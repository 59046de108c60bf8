//! Containers driven the way a device backend drives them, with a fake in-memory device
//! (see `store::tests::FakeMem`): the backend-facing accessors of `Arg`/`ArgMut`, lazy
//! copy-back of stale ranges only, invalidation by host writes.

use std::sync::Arc;

use super::coherence::Location;
use super::store::tests::{attach_to, FakeMem};
use super::store::ELEMENT_BLOCK;
use super::{Input, Matrix, Output, Vector};
use crate::DeviceType;

const D0: Location = Location::Device(0);

/// What a device backend does for `Map` reading `input` (an `Input`): upload what is
/// missing on the device.
fn fake_upload<T: DeviceType>(input: &impl Input<T>, dev: &FakeMem) {
    let arg = input.arg();
    let mut st = arg.lock();
    for part in st.coherence.missing(D0, arg.range()) {
        arg.store().bring_back(&mut st, part.clone()).unwrap();
        dev.put(part.start, arg.store().host_slice(&st, part.clone()));
        st.coherence.mark_valid(D0, part, None);
    }
}

/// What a device backend does for a kernel writing `vals` into `out`: the device holds the
/// result, the host copy becomes stale.
fn fake_kernel<T: DeviceType>(out: &mut impl Output<T>, dev: &FakeMem, vals: &[T]) {
    let arg = out.arg_mut();
    assert_eq!(vals.len(), arg.shape().len());
    dev.put(arg.offset(), vals);
    arg.lock().coherence.write(D0, arg.range(), None);
}

fn attach<T: DeviceType>(c: &impl Input<T>) -> Arc<FakeMem> {
    let arg = c.arg();
    attach_to::<T>(&mut arg.lock(), 0, arg.full_len())
}

#[test]
fn arg_accessors() {
    let mut v = Vector::from_fn(10, |i| i as u32);
    {
        let w = v.view(3..7);
        let a = w.arg();
        assert_eq!((a.full_len(), a.offset(), a.range()), (10, 3, 3..7));
        assert_eq!(a.host().unwrap(), &[3, 4, 5, 6]);
        assert!(a.lock().device(0).is_none());
    }
    let mut w = v.view_mut(5..9);
    let mut a = w.arg_mut();
    assert_eq!((a.full_len(), a.offset(), a.range()), (10, 5, 5..9));
    a.reborrow().host_mut().unwrap()[0] = 50;
    a.host_overwrite().unwrap()[3] = 80;
    assert_eq!(v.to_vec(), vec![0, 1, 2, 3, 4, 50, 6, 7, 80, 9]);
}

#[test]
fn device_write_then_host_reads_download_only_stale_once() {
    let mut v = Vector::from_fn(100, |i| i as f32);
    let dev = attach(&v);
    fake_upload(&v, &dev);
    assert_eq!(dev.bytes(), 0);
    // A kernel writes 40..50 through a view.
    fake_kernel(&mut v.view_mut(40..50), &dev, &[-1.0f32; 10]);
    // Host reads outside the stale range download nothing.
    assert_eq!(v.view(0..10).as_slice()[0], 0.0);
    assert_eq!(v.view(50..100).as_slice()[0], 50.0);
    assert_eq!(dev.bytes(), 0);
    // A slice inside: only it comes back.
    assert_eq!(v.view(45..46).as_slice(), [-1.0]);
    assert_eq!(dev.bytes(), 4);
    // One element: the stale rest of its block (the 9 remaining elements, in two pieces).
    assert_eq!(v[41], -1.0);
    assert_eq!(dev.bytes(), 40);
    assert_eq!(dev.downloads.load(std::sync::atomic::Ordering::SeqCst), 3);
    // The whole vector: nothing more.
    assert_eq!(
        v.as_slice()[39..51],
        [39.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, 50.0]
    );
    assert_eq!(dev.bytes(), 40);
    // Second read: nothing.
    assert_eq!(v.to_vec()[45], -1.0);
    let _ = v.clone();
    assert_eq!(dev.bytes(), 40);
    // The device copy is still valid everywhere: a new read-upload copies nothing.
    assert!(v.arg().lock().coherence.missing(D0, 0..100).is_empty());
}

#[test]
fn host_writes_invalidate_device_copies() {
    let mut v = Vector::from_fn(8, |i| i as i32);
    let dev = attach(&v);
    fake_upload(&v, &dev);
    v[2] = 20;
    assert_eq!(v.arg().lock().coherence.missing(D0, 0..8), vec![2..3]);
    v.view_mut(5..7).as_mut_slice().fill(0);
    assert_eq!(v.arg().lock().coherence.missing(D0, 0..8), vec![2..3, 5..7]);
    v.as_mut_slice();
    assert_eq!(v.arg().lock().coherence.missing(D0, 0..8), vec![0..8]);
    // A re-upload then copies only what the host changed.
    fake_kernel(&mut v, &dev, &[1; 8]);
    assert_eq!(v.as_slice(), &[1; 8]);
}

#[test]
fn as_mut_slice_brings_stale_data_back_first() {
    let mut v = Vector::from_fn(6, |i| i as u8);
    let dev = attach(&v);
    fake_kernel(&mut v.view_mut(0..3), &dev, &[9u8, 9, 9]);
    let s = v.as_mut_slice();
    assert_eq!(s, &[9, 9, 9, 3, 4, 5]);
    s[0] = 0;
    assert_eq!(dev.bytes(), 3);
    assert_eq!(v.to_vec(), vec![0, 9, 9, 3, 4, 5]);
}

#[test]
fn overwrite_output_downloads_nothing() {
    let mut v = Vector::from_fn(6, |i| i as u64);
    let dev = attach(&v);
    fake_kernel(&mut v, &dev, &[7u64; 6]);
    v.arg_mut().host_overwrite().unwrap().fill(1);
    assert_eq!(dev.bytes(), 0);
    assert_eq!(v.as_slice(), &[1; 6]);
    assert!(v.arg().lock().coherence.valid(D0).is_empty());
}

#[test]
fn failed_copy_back_is_an_error_not_corruption() {
    let mut v = Vector::from_fn(4, |i| i as i16);
    let dev = attach(&v);
    fake_kernel(&mut v, &dev, &[5i16; 4]);
    dev.fail.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(v.try_as_slice().is_err());
    assert!(v.try_as_mut_slice().is_err());
    assert!(format!("{v:?}").contains("copy-back failed"));
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| v.as_slice().len()));
    assert!(caught.is_err());
    dev.fail.store(false, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(v.as_slice(), &[5; 4]);
}

#[test]
fn matrix_rows_come_back_individually() {
    let mut m = Matrix::from_fn(4, 3, |r, c| (r * 3 + c) as u32);
    let dev = attach(&m);
    fake_kernel(&mut m, &dev, &(100..112).collect::<Vec<u32>>());
    assert_eq!(m.row(2), &[106, 107, 108]);
    assert_eq!(dev.bytes(), 12);
    // One element brings back the stale rest of its block (here the whole matrix) once.
    assert_eq!(m[(3, 0)], 109);
    assert_eq!(dev.bytes(), 48);
    assert_eq!(m[(0, 1)], 101);
    assert_eq!(m.to_vec(), (100..112).collect::<Vec<u32>>());
    assert_eq!(dev.bytes(), 48);
    m[(0, 0)] = 0;
    assert_eq!(m.arg().lock().coherence.missing(D0, 0..12), vec![0..1]);
}

#[test]
fn element_reads_of_a_device_result_copy_block_by_block() {
    let n = 3 * ELEMENT_BLOCK + 5;
    let mut v = Vector::from_fn(n, |i| i as u32);
    let dev = attach(&v);
    let new: Vec<u32> = (0..n as u32).map(|i| i * 2).collect();
    fake_kernel(&mut v, &dev, &new);
    assert_eq!(v[ELEMENT_BLOCK + 1], new[ELEMENT_BLOCK + 1]);
    assert_eq!(dev.bytes(), 4 * ELEMENT_BLOCK);
    let all: Vec<u32> = (0..n).map(|i| v[i]).collect();
    assert_eq!(all, new);
    assert_eq!(dev.bytes(), 4 * n);
    // The host now holds everything and the device too: reads skip the lock, a write
    // still invalidates the device's copy of the element it writes.
    v[7] = 1;
    assert_eq!(v.arg().lock().coherence.missing(D0, 0..n), vec![7..8]);
    assert_eq!(v[7], 1);
}

#[test]
fn host_only_writes_skip_the_state_and_stay_coherent() {
    let mut v = Vector::from_fn(10, |i| i as u32);
    for i in 0..10 {
        v[i] += 1;
    }
    assert_eq!(v.to_vec(), (1..11).collect::<Vec<u32>>());
    // A device copy made afterwards sees the writes; a write after it invalidates it.
    let dev = attach(&v);
    fake_kernel(&mut v, &dev, &[9; 10]);
    assert_eq!(v[3], 9);
    v[3] = 4;
    assert_eq!(v.to_vec(), vec![9, 9, 9, 4, 9, 9, 9, 9, 9, 9]);
    assert_eq!(v.arg().lock().coherence.missing(D0, 0..10), vec![3..4]);
}

#[test]
fn shared_readers_on_threads_bring_back_once() {
    let mut v = Vector::from_fn(4096, |i| i as u32);
    let dev = attach(&v);
    fake_kernel(&mut v, &dev, &vec![3u32; 4096]);
    std::thread::scope(|s| {
        for t in 0..4 {
            let v = &v;
            s.spawn(move || {
                let part = v.view(t * 1024..(t + 1) * 1024);
                assert!(part.as_slice().iter().all(|x| *x == 3));
                assert!(v.as_slice().iter().all(|x| *x == 3));
            });
        }
    });
    assert_eq!(dev.bytes(), 4096 * 4);
}

#[test]
fn pinned_vectors_use_the_registered_allocator() {
    use super::host::tests::{FakePinned, REGISTRY_LOCK};
    use super::host::{register_pinned_allocator, HostKind};

    let _g = REGISTRY_LOCK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let prev = register_pinned_allocator(None);
    let err = Vector::pinned(vec![1.0f32; 8]).unwrap_err();
    assert!(
        matches!(err, crate::Error::BackendUnavailable { .. }),
        "{err}"
    );

    let fake = Arc::new(FakePinned::default());
    register_pinned_allocator(Some(fake.clone()));
    let ptrs = {
        let v = Vector::pinned(vec![1.0f32; 8]).unwrap();
        assert!(v.is_pinned());
        assert_eq!(v.as_slice(), &[1.0; 8]);
        let c = v.clone();
        assert!(c.is_pinned());
        assert!(!Vector::pageable(vec![0u8; 4]).is_pinned());
        if HostKind::default_kind() == HostKind::Pinned {
            assert!(Vector::from(vec![0u8; 4]).is_pinned());
            assert!(Matrix::<u8>::zeroed(2, 2).is_pinned());
        }
        let ptrs = [v.as_slice().as_ptr(), c.as_slice().as_ptr()];
        assert!(ptrs.iter().all(|p| fake.owns(*p)));
        ptrs
    };
    assert!(ptrs.iter().all(|p| fake.freed(*p)));
    register_pinned_allocator(prev);
}
