//! `Backend::Auto`: each call asks [`crate::tune`] where it runs, then runs there (or
//! split between Rayon and a GPU) through the ordinary executors.
//!
//! The tuner sees the call's skeleton, user function, element types, size, and for every
//! candidate the bytes of the operands that are not valid where that candidate computes
//! (read from the containers' coherence state without moving anything).

use std::any::{type_name, TypeId};
use std::ops::Range;
use std::time::Instant;

use super::{concrete, cpu, kernel_cache, Execute};
use crate::containers::{Arg, Location, OutArgs, Shape};
use crate::plan::{
    self, ArgTuple, ArgVisitor, Axis, FilterSig, FoldSig, HistogramSig, HostSlices, MapArraySig,
    MapReduceSig, MapSig, PairsReduceSig, PairsSig, ReduceByKeySig, SortSig, WavefrontSig,
};
use crate::skeletons::Options;
use crate::tune::model::bucket_of;
use crate::tune::{self, Call, Choice, Decision, FastKey, Measure, HYBRID_MIN};
use crate::userfn::{ElementwiseFn, IndexKind, UserFn, Window2Fn, WindowFn};
use crate::{Backend, DeviceType, Error, Result};

/// The executor of `Backend::Auto`, with one call's options.
pub(crate) struct Auto {
    options: Options,
    name: &'static str,
}

/// Where the bytes of a call's operands are missing: on the host, on the CUDA device, on
/// the OpenCL device; and whether what the host misses is on the CUDA device.
#[derive(Default)]
struct Operands {
    types: Vec<&'static str>,
    /// Bytes of every operand: the most any candidate could have to move.
    total: u64,
    host: u64,
    cuda: u64,
    opencl: u64,
    host_from_cuda: bool,
}

fn missing<T>(st: &crate::containers::State, loc: Option<Location>, range: Range<usize>) -> u64 {
    let Some(loc) = loc else { return 0 };
    let elems: usize = st
        .coherence
        .missing(loc, range)
        .iter()
        .map(Range::len)
        .sum();
    (elems * std::mem::size_of::<T>()) as u64
}

impl ArgVisitor for Operands {
    fn visit<T: DeviceType>(&mut self, arg: Arg<'_, T>) -> Result<()> {
        self.types.push(type_name::<T>());
        self.total += (arg.range().len() * std::mem::size_of::<T>()) as u64;
        let st = arg.lock();
        let (cuda, opencl) = (location(Backend::Cuda), location(Backend::OpenCl));
        self.host += missing::<T>(&st, Some(Location::Host), arg.range());
        self.cuda += missing::<T>(&st, cuda, arg.range());
        self.opencl += missing::<T>(&st, opencl, arg.range());
        self.host_from_cuda |= cuda.is_some_and(|c| st.coherence.valid(c).count() > 0);
        Ok(())
    }
}

/// Which places hold every operand whole: bit 0 the host, 1 the CUDA device, 2 the
/// OpenCL device (a cheap check per call, unlike counting the missing bytes).
struct Places {
    bits: u8,
    places: [Option<Location>; 3],
}

impl Places {
    fn new() -> Places {
        Places {
            bits: 0b111,
            places: [
                Some(Location::Host),
                location(Backend::Cuda),
                location(Backend::OpenCl),
            ],
        }
    }
}

impl ArgVisitor for Places {
    fn visit<T: DeviceType>(&mut self, arg: Arg<'_, T>) -> Result<()> {
        let st = arg.lock();
        for (bit, place) in self.places.iter().enumerate() {
            if !place.is_some_and(|p| st.coherence.is_valid(p, arg.range())) {
                self.bits &= !(1 << bit);
            }
        }
        Ok(())
    }
}

impl Operands {
    fn of<'a, I: ArgTuple<'a>>(inputs: &I) -> Result<Operands> {
        let mut ops = Operands::default();
        inputs.visit(&mut ops)?;
        Ok(ops)
    }

    fn with<'a, I: ArgTuple<'a>>(mut self, more: &I) -> Result<Operands> {
        let types = std::mem::take(&mut self.types);
        more.visit(&mut self)?;
        // Container arguments are not element types; they still count as operands.
        self.types = types;
        Ok(self)
    }

    fn call<F>(self, skeleton: &str, out: &str, size: usize, splittable: bool) -> Call {
        let types = format!("{}->{out}", self.types.join(","));
        let mut call = Call::new(skeleton, type_name::<F>(), types, size);
        let to_host = if self.host_from_cuda {
            Backend::Cuda
        } else {
            Backend::OpenCl
        };
        call.moves = vec![
            (Backend::Cpu, vec![(to_host, self.host)]),
            (Backend::Rayon, vec![(to_host, self.host)]),
            (Backend::Cuda, vec![(Backend::Cuda, self.cuda)]),
            (Backend::OpenCl, vec![(Backend::OpenCl, self.opencl)]),
        ];
        call.splittable = splittable;
        call.total_bytes = self.total;
        call
    }
}

/// Whether `out` may be borrowed again as all of its rows (an operand spread over MPI
/// ranks is not: its parts keep their spread only as they are).
fn whole_rows<'o, O: OutArgs<'o>>(out: &O) -> bool {
    #[cfg(feature = "mpi")]
    return !out.any_distributed();
    #[cfg(not(feature = "mpi"))]
    {
        let _ = out;
        true
    }
}

/// Where a device backend keeps container copies (`None`: not compiled in).
fn location(backend: Backend) -> Option<Location> {
    match backend {
        #[cfg(feature = "cuda")]
        Backend::Cuda => Some(super::cuda::location()),
        #[cfg(feature = "opencl")]
        Backend::OpenCl => Some(super::opencl::location()),
        Backend::Cpu | Backend::Rayon => Some(Location::Host),
        _ => None,
    }
}

/// Waits for everything `backend` enqueued, so that a measured time is the whole call.
pub(crate) fn finish(backend: Backend) -> Result<()> {
    match backend {
        Backend::Cuda => crate::debug::synchronize(),
        #[cfg(feature = "opencl")]
        Backend::OpenCl => super::opencl::finish(),
        _ => Ok(()),
    }
}

/// Host-to-device bytes per second of `backend`: a fresh 64 MiB operand is copied by a
/// Map twice, once from the host and once already resident; the difference is the upload.
pub(crate) fn measure_link(backend: Backend) -> Result<f64> {
    #[crate::userfn]
    fn copy_f32(x: f32) -> f32 {
        x
    }
    let n = 16 << 20;
    let mut out = crate::Vector::<f32>::zeroed(n);
    let map = crate::Map::new(copy_f32).backend(backend);
    let mut best = f64::INFINITY;
    let mut resident = f64::INFINITY;
    for _ in 0..3 {
        let fresh = crate::Vector::from(vec![1.0f32; n]);
        let t = Instant::now();
        map.run(&fresh, &mut out)?;
        finish(backend)?;
        best = best.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        map.run(&fresh, &mut out)?;
        finish(backend)?;
        resident = resident.min(t.elapsed().as_secs_f64());
    }
    let upload = (best - resident).max(1e-6);
    Ok((n * std::mem::size_of::<f32>()) as f64 / upload)
}

impl Auto {
    pub(crate) fn new(options: &Options, name: &'static str) -> Self {
        Auto {
            options: *options,
            name,
        }
    }

    fn on(&self, backend: Backend) -> Options {
        Options {
            backend: Some(backend),
            ..self.options
        }
    }

    /// Whether a call of `n` elements of `F` may be split: its elements are independent of
    /// their position (no `#[index]`), and for Map it is not checked (a checked call
    /// reports the first failing element, which a split would have to merge).
    fn splittable<F: ElementwiseFn>(&self, n: usize, checked: bool) -> bool {
        <F::Index as IndexKind>::DIMS == 0 && !checked && n >= HYBRID_MIN
    }

    /// Where a call of `F` over `n` elements runs: the decision remembered for its function,
    /// size bucket and operand places, else a new one from the full description (returned
    /// too, for the measurement).
    fn decide<'x, 'y, F: 'static, I: ArgTuple<'x>, J: ArgTuple<'y>>(
        &self,
        inputs: &I,
        arrays: &J,
        skeleton: &'static str,
        out: &str,
        n: usize,
        splittable: bool,
    ) -> Result<(Decision, Option<Call>)> {
        // A decision that holds wherever the operands are needs no look at them (no lock
        // of their coherence state): the common case of small calls kept on the host.
        let mut fast = FastKey {
            function: TypeId::of::<F>(),
            skeleton,
            bucket: bucket_of(n),
            places: tune::ANYWHERE | u8::from(splittable) << 3,
        };
        if let Some(d) = tune::remembered(&fast, n) {
            return Ok((d, None));
        }
        let mut places = Places::new();
        inputs.visit(&mut places)?;
        arrays.visit(&mut places)?;
        fast.places = places.bits | u8::from(splittable) << 3;
        if let Some(d) = tune::remembered(&fast, n) {
            return Ok((d, None));
        }
        let call = Operands::of(inputs)?
            .with(arrays)?
            .call::<F>(skeleton, out, n, splittable);
        Ok((tune::decide(&call, &fast), Some(call)))
    }

    /// [`Auto::decide`], then [`Auto::run`]: a call that is never split.
    #[allow(clippy::too_many_arguments)]
    fn single<'x, 'y, F: 'static, I: ArgTuple<'x>, J: ArgTuple<'y>, R>(
        &self,
        inputs: &I,
        arrays: &J,
        skeleton: &'static str,
        out: &str,
        n: usize,
        splittable: bool,
        f: impl FnOnce(Backend, Options) -> Result<R>,
    ) -> Result<R> {
        let (d, call) = self.decide::<F, I, J>(inputs, arrays, skeleton, out, n, splittable)?;
        self.run(call.as_ref(), d, f)
    }

    /// Runs `f` with the options of the decided backend, timing it when calibrating.
    fn run<R>(
        &self,
        call: Option<&Call>,
        d: Decision,
        f: impl FnOnce(Backend, Options) -> Result<R>,
    ) -> Result<R> {
        let backend = match d.choice {
            Choice::Backend(b) => b,
            Choice::Split { gpu, .. } => gpu,
        };
        tune::ran(backend);
        self.timed(call, d, backend, f)
    }

    /// [`Auto::run`] for a call that may run again elsewhere: on a device, a kernel not
    /// built yet is built in the background while the call runs on the best host backend
    /// (the device call stops before it changed anything, so running it again is exact).
    ///
    /// Only a device predicted fastest is worth a compile; a trial of another one runs only
    /// where its kernel is built already (a Map's explored trial, mostly a memory-bound
    /// call, would compile for nothing).
    fn run_again<R>(
        &self,
        call: Option<&Call>,
        d: Decision,
        f: impl FnMut(Backend, Options) -> Result<R>,
    ) -> Result<R> {
        self.run_again_compiling(call, d, !d.explore, f)
    }

    /// [`Auto::run_again`], where `start` says whether a device whose kernel is not built
    /// starts its compile (in the background; the call runs on the host meanwhile).
    fn run_again_compiling<R>(
        &self,
        call: Option<&Call>,
        d: Decision,
        start: bool,
        mut f: impl FnMut(Backend, Options) -> Result<R>,
    ) -> Result<R> {
        let backend = match d.choice {
            Choice::Backend(b) => b,
            Choice::Split { gpu, .. } => gpu,
        };
        tune::ran(backend);
        if !matches!(backend, Backend::Cuda | Backend::OpenCl) {
            return self.timed(call, d, backend, f);
        }
        let finished = kernel_cache::compiles_finished();
        match kernel_cache::deferred(start, || self.timed(call, d, backend, &mut f)) {
            Err(_) if kernel_cache::pending() => {
                let host = tune::host_backend();
                tune::compiling(call, backend, host, start, finished);
                tune::ran(host);
                f(host, self.on(host))
            }
            done => done,
        }
    }

    /// Runs `f` on `backend`; only a measured call reads the clock (the steady state does
    /// not pay for it).
    fn timed<R>(
        &self,
        call: Option<&Call>,
        d: Decision,
        backend: Backend,
        f: impl FnOnce(Backend, Options) -> Result<R>,
    ) -> Result<R> {
        // A decided call on the host (not a remembered one) is watched: one that runs long
        // opens the GPU meanwhile (`tune::host_call`).
        let host = matches!(backend, Backend::Cpu | Backend::Rayon);
        let Some(call) = call.filter(|_| d.measure != Measure::No) else {
            return match call.is_some() && host {
                true => tune::host_call(|| f(backend, self.on(backend))),
                false => f(backend, self.on(backend)),
            };
        };
        let start = Instant::now();
        let result = match host {
            true => tune::host_call(|| f(backend, self.on(backend)))?,
            false => f(backend, self.on(backend))?,
        };
        finish(backend)?;
        let ns = start.elapsed().as_secs_f64() * 1e9;
        tune::finish(call, backend, d, ns);
        Ok(result)
    }

    /// Runs `gpu_part` on another thread while `cpu_part` runs here; both results.
    fn both<A: Send, B: Send>(
        &self,
        gpu_part: impl FnOnce() -> Result<A> + Send,
        cpu_part: impl FnOnce() -> Result<B>,
    ) -> Result<(A, B)> {
        std::thread::scope(|s| {
            let gpu = s.spawn(gpu_part);
            let cpu = cpu_part();
            let gpu = gpu.join().map_err(|_| {
                Error::Driver(
                    format!("the GPU part of a split call of {} panicked", self.name).into(),
                )
            })?;
            Ok((gpu?, cpu?))
        })
    }
}

impl Execute for Auto {
    fn map<'a, 'o, S: MapSig<'a, 'o>>(&self, plan: plan::Map<'_, 'a, 'o, S>) -> Result<()> {
        let n = plan.out.elems();
        let (d, call) = self.decide::<S::F, _, _>(
            &plan.inputs,
            &plan.arrays,
            "map",
            type_name::<<S::F as UserFn>::Out>(),
            n,
            self.splittable::<S::F>(n, self.options.checked()),
        )?;
        if let Choice::Split {
            cpu,
            gpu,
            cpu_elems: k,
        } = d.choice
        {
            let plan::Map {
                arrays,
                inputs,
                mut out,
                uniforms,
            } = plan;
            // The GPU part is only enqueued (its results land on the device), so the CPU
            // part runs while the device computes.
            concrete!(gpu, self.on(gpu), self.name, |exec| exec.map(plan::Map::<
                (S::F, S::I, _),
            > {
                arrays,
                inputs: inputs.sub(k..n),
                out: out.part(k..n),
                uniforms,
            }))?;
            return concrete!(cpu, self.on(cpu), self.name, |exec| exec.map(plan::Map::<
                (S::F, S::I, _),
            > {
                arrays,
                inputs: inputs.sub(0..k),
                out: out.part(0..k),
                uniforms,
            }));
        }
        // Only a device call may run again elsewhere (its kernel still compiling): a host
        // call keeps the plan as it is (no shapes looked at on the fast path).
        let device = matches!(d.choice, Choice::Backend(Backend::Cuda | Backend::OpenCl));
        if !device || !whole_rows(&plan.out) {
            return self.run(call.as_ref(), d, |b, o| {
                concrete!(b, o, self.name, |exec| exec.map(plan))
            });
        }
        let plan::Map {
            arrays,
            inputs,
            mut out,
            uniforms,
        } = plan;
        let rows = match out.shapes()[0] {
            Shape::Matrix { rows, .. } => rows,
            Shape::Vector(len) => len,
            Shape::Tensor3 { d0, d1, .. } => d0 * d1,
        };
        self.run_again(call.as_ref(), d, |b, o| {
            concrete!(b, o, self.name, |exec| exec.map(plan::Map::<(
                S::F,
                S::I,
                _
            )> {
                arrays,
                inputs,
                out: out.rows(0..rows),
                uniforms,
            }))
        })
    }

    fn map_array<'a, S: MapArraySig<'a>>(&self, plan: plan::MapArray<'_, 'a, S>) -> Result<()> {
        let inputs = plan.inputs;
        self.single::<S::F, _, _, _>(
            &inputs,
            &(plan.array,),
            "map_array",
            type_name::<<S::F as UserFn>::Out>(),
            plan.out.shape().len(),
            false,
            |b, o| concrete!(b, o, self.name, |exec| exec.map_array(plan)),
        )
    }

    fn reduce<S: FoldSig>(&self, plan: plan::Reduce<'_, S>) -> Result<S::T> {
        let plan::Reduce { input, start } = plan;
        let n = input.shape().len();
        let (d, call) = self.decide::<S::F, _, _>(
            &(input,),
            &(),
            "reduce",
            type_name::<S::T>(),
            n,
            self.splittable::<S::F>(n, false),
        )?;
        if let Choice::Split {
            cpu,
            gpu,
            cpu_elems: k,
        } = d.choice
        {
            // The GPU folds k+1.. starting from element k (no identity is known), the
            // CPU folds ..k from `start`; the two partials are combined in order.
            let pivot = input.host()?[k];
            let (tail, head) = self.both(
                || {
                    concrete!(gpu, self.on(gpu), self.name, |exec| exec.reduce(
                        plan::Reduce::<S> {
                            input: input.sub(k + 1..n),
                            start: pivot,
                        }
                    ))
                },
                || {
                    concrete!(cpu, self.on(cpu), self.name, |exec| exec.reduce(
                        plan::Reduce::<S> {
                            input: input.sub(0..k),
                            start,
                        }
                    ))
                },
            )?;
            return crate::check::host_call(<S::F as crate::userfn::UserFn>::NAME, || {
                cpu::combine::<S::F, S::T>(head, Some(tail))
            });
        }
        self.run_again(call.as_ref(), d, |b, o| {
            concrete!(b, o, self.name, |exec| exec
                .reduce(plan::Reduce::<S> { input, start }))
        })
    }

    fn reduce_axis<S: FoldSig>(&self, plan: plan::ReduceAxis<'_, S>) -> Result<()> {
        let skeleton = match plan.axis {
            Axis::Cols => "reduce_cols",
            _ => "reduce_rows",
        };
        self.single::<S::F, _, _, _>(
            &(plan.input,),
            &(),
            skeleton,
            type_name::<S::T>(),
            plan.input.shape().len(),
            false,
            |b, o| concrete!(b, o, self.name, |exec| exec.reduce_axis(plan)),
        )
    }

    fn map_reduce<'a, S: MapReduceSig<'a>>(
        &self,
        plan: plan::MapReduce<'_, 'a, S>,
    ) -> Result<<S::M as UserFn>::Out> {
        let plan::MapReduce {
            arrays,
            inputs,
            shape,
            uniforms,
            start,
        } = plan;
        let n = shape.len();
        let (d, call) = self.decide::<(S::M, S::R), _, _>(
            &inputs,
            &arrays,
            "map_reduce",
            type_name::<<S::M as UserFn>::Out>(),
            n,
            self.splittable::<S::M>(n, false),
        )?;
        if let Choice::Split {
            cpu,
            gpu,
            cpu_elems: k,
        } = d.choice
        {
            // As for Reduce: the GPU's fold starts from the mapped element k.
            let pivot = crate::check::catch(self.name, || {
                let refs = cpu::container_refs::<S::M>(&arrays)?;
                let at_k = inputs.host()?.slice(k..k + 1);
                cpu::map_fold::<S::M, S::R>(refs, at_k, k..k + 1, shape.cols(), uniforms)
                    .ok_or_else(|| Error::InvalidArgument("split of an empty MapReduce".into()))
            })?;
            let (tail, head) = self.both(
                || {
                    concrete!(gpu, self.on(gpu), self.name, |exec| exec.map_reduce(
                        plan::MapReduce::<S> {
                            arrays,
                            inputs: inputs.sub(k + 1..n),
                            shape: Shape::Vector(n - k - 1),
                            uniforms,
                            start: pivot,
                        }
                    ))
                },
                || {
                    concrete!(cpu, self.on(cpu), self.name, |exec| exec.map_reduce(
                        plan::MapReduce::<S> {
                            arrays,
                            inputs: inputs.sub(0..k),
                            shape: Shape::Vector(k),
                            uniforms,
                            start,
                        }
                    ))
                },
            )?;
            return crate::check::host_call(<S::R as crate::userfn::UserFn>::NAME, || {
                cpu::combine::<S::R, _>(head, Some(tail))
            });
        }
        self.run_again(call.as_ref(), d, |b, o| {
            concrete!(b, o, self.name, |exec| exec.map_reduce(plan::MapReduce::<
                S,
            > {
                arrays,
                inputs,
                shape,
                uniforms,
                start,
            }))
        })
    }

    fn scan<S: FoldSig>(&self, plan: plan::Scan<'_, S>) -> Result<()> {
        self.single::<S::F, _, _, _>(
            &(plan.input,),
            &(),
            "scan",
            type_name::<S::T>(),
            plan.input.shape().len(),
            false,
            |b, o| concrete!(b, o, self.name, |exec| exec.scan(plan)),
        )
    }

    fn map_overlap<F: WindowFn>(&self, plan: plan::MapOverlap<'_, F>) -> Result<()> {
        let plan::MapOverlap {
            input,
            mut out,
            stencil,
            axis,
            uniforms,
        } = plan;
        let skeleton = match axis {
            Axis::Rows => "map_overlap_rows",
            Axis::Cols => "map_overlap_cols",
            Axis::Flat => "map_overlap",
        };
        let n = input.shape().len();
        let out_type = type_name::<F::Out>();
        let (d, call) = self.decide::<F, _, _>(&(input,), &(), skeleton, out_type, n, false)?;
        // A device whose stencil kernel is not built yet asks for it before it moves or
        // writes anything: the call runs on the host while it compiles. A trial compiles
        // too (it passed the tuner's checks): a compute-bound stencil (a median) may be
        // fastest on the device, which it would otherwise never reach.
        self.run_again_compiling(call.as_ref(), d, true, |b, o| {
            let plan = plan::MapOverlap::<F> {
                input,
                out: out.reborrow(),
                stencil,
                axis,
                uniforms,
            };
            concrete!(b, o, self.name, |exec| exec.map_overlap(plan))
        })
    }

    fn map_overlap_2d<F: Window2Fn>(&self, plan: plan::MapOverlap2d<'_, F>) -> Result<()> {
        let plan::MapOverlap2d {
            input,
            mut out,
            stencil,
            uniforms,
        } = plan;
        let n = input.shape().len();
        let out_type = type_name::<F::Out>();
        let (d, call) =
            self.decide::<F, _, _>(&(input,), &(), "map_overlap_2d", out_type, n, false)?;
        // As `map_overlap`: a trial compiles too.
        self.run_again_compiling(call.as_ref(), d, true, |b, o| {
            let plan = plan::MapOverlap2d::<F> {
                input,
                out: out.reborrow(),
                stencil,
                uniforms,
            };
            concrete!(b, o, self.name, |exec| exec.map_overlap_2d(plan))
        })
    }

    fn map_pairs<S: PairsSig>(&self, plan: plan::MapPairs<'_, '_, S>) -> Result<()> {
        let arrays = plan.arrays;
        self.single::<S::F, _, _, _>(
            &(plan.v, plan.h),
            &arrays,
            "map_pairs",
            type_name::<<S::F as UserFn>::Out>(),
            plan.out.shape().len(),
            false,
            |b, o| concrete!(b, o, self.name, |exec| exec.map_pairs(plan)),
        )
    }

    fn map_pairs_reduce<S: PairsReduceSig>(
        &self,
        plan: plan::MapPairsReduce<'_, '_, S>,
    ) -> Result<()> {
        let arrays = plan.arrays;
        self.single::<(S::M, S::R), _, _, _>(
            &(plan.v, plan.h),
            &arrays,
            "map_pairs_reduce",
            type_name::<<S::M as UserFn>::Out>(),
            plan.v.shape().len() * plan.h.shape().len(),
            false,
            |b, o| concrete!(b, o, self.name, |exec| exec.map_pairs_reduce(plan)),
        )
    }

    fn filter<S: FilterSig>(&self, plan: plan::Filter<'_, S>) -> Result<usize> {
        self.single::<S::F, _, _, _>(
            &(plan.input,),
            &(),
            "filter",
            type_name::<S::T>(),
            plan.input.shape().len(),
            false,
            |b, o| concrete!(b, o, self.name, |exec| exec.filter(plan)),
        )
    }

    fn sort<S: SortSig>(&self, plan: plan::Sort<'_, S>) -> Result<()> {
        let n = plan.keys.shape().len();
        // The operands as inputs (where they are valid decides), only while deciding.
        let keys = Arg::new(plan.keys.store(), plan.keys.offset(), plan.keys.shape());
        let decided = match &plan.values {
            Some(v) => {
                let values = Arg::new(v.store(), v.offset(), v.shape());
                self.decide::<(S::K, S::V), _, _>(
                    &(keys, values),
                    &(),
                    "sort",
                    type_name::<S::K>(),
                    n,
                    false,
                )
            }
            None => self.decide::<(S::K, S::V), _, _>(
                &(keys,),
                &(),
                "sort",
                type_name::<S::K>(),
                n,
                false,
            ),
        };
        let (d, call) = decided?;
        self.run(call.as_ref(), d, |b, o| {
            concrete!(b, o, self.name, |exec| exec.sort(plan))
        })
    }

    fn histogram<'a, S: HistogramSig<'a>>(
        &self,
        plan: plan::Histogram<'_, 'a, '_, S>,
    ) -> Result<()> {
        let (d, call) = self.decide::<S::F, _, _>(
            &plan.inputs,
            &plan.arrays,
            "histogram",
            type_name::<S::C>(),
            plan.shape.len(),
            false,
        )?;
        // As Map: a device call whose kernel still compiles runs again on the host (the
        // CUDA Histogram looks its kernel up before it touches anything).
        let plan::Histogram {
            arrays,
            inputs,
            shape,
            mut counts,
            uniforms,
        } = plan;
        self.run_again(call.as_ref(), d, |b, o| {
            concrete!(b, o, self.name, |exec| exec.histogram(
                plan::Histogram::<S> {
                    arrays,
                    inputs,
                    shape,
                    counts: counts.reborrow(),
                    uniforms,
                }
            ))
        })
    }

    fn reduce_by_key<'a, S: ReduceByKeySig<'a>>(
        &self,
        plan: plan::ReduceByKey<'_, 'a, S>,
    ) -> Result<()> {
        let (d, call) = self.decide::<(S::F, S::R), _, _>(
            &plan.inputs,
            &plan.arrays,
            "reduce_by_key",
            type_name::<S::V>(),
            plan.shape.len(),
            false,
        )?;
        self.run(call.as_ref(), d, |b, o| {
            concrete!(b, o, self.name, |exec| exec.reduce_by_key(plan))
        })
    }

    fn map_overlap_3d<F: crate::userfn::Window3Fn>(
        &self,
        plan: plan::MapOverlap3d<'_, F>,
    ) -> Result<()> {
        self.single::<F, _, _, _>(
            &(plan.input,),
            &(),
            "map_overlap_3d",
            type_name::<F::Out>(),
            plan.input.shape().len(),
            false,
            |b, o| concrete!(b, o, self.name, |exec| exec.map_overlap_3d(plan)),
        )
    }

    // The general stencil forms: the tuner has no model of their GPU kernel yet, so Auto
    // runs them on Rayon, which falls back to the sequential loop for small calls.
    fn map_overlap_windows<F: crate::userfn::Overlap1Fn>(
        &self,
        plan: plan::MapOverlapWindows<'_, F>,
    ) -> Result<()> {
        let o = self.options;
        concrete!(Backend::Rayon, o, self.name, |exec| exec
            .map_overlap_windows(plan))
    }

    fn map_overlap_windows_2d<F: crate::userfn::Overlap2Fn>(
        &self,
        plan: plan::MapOverlapWindows<'_, F>,
    ) -> Result<()> {
        let o = self.options;
        concrete!(Backend::Rayon, o, self.name, |exec| exec
            .map_overlap_windows_2d(plan))
    }

    /// Decided as a call over the matrix's cells that reads the matrix where it is valid
    /// (the model's measurements of `wavefront` calls are its own); never split.
    fn wavefront<S: WavefrontSig>(&self, plan: plan::Wavefront<'_, '_, S>) -> Result<()> {
        let arrays = plan.arrays;
        let n = plan.m.shape().len();
        let (d, call) = self.decide::<S::F, _, _>(
            &(plan.m.as_arg(),),
            &arrays,
            "wavefront",
            type_name::<S::T>(),
            n,
            false,
        )?;
        self.run(call.as_ref(), d, |b, o| {
            concrete!(b, o, self.name, |exec| exec.wavefront(plan))
        })
    }
}
