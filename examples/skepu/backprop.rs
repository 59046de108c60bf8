//! Rodinia's `backprop` training step written with skel's forms, as a user ports it: a
//! network of `--size` input units, 16 hidden units and 1 output unit (each layer with a
//! bias unit 0 held at 1), trained on one pattern with Rodinia's learning rate and
//! momentum. One step is 7 calls:
//!
//! 1. the hidden sums: `MapPairsReduce::run_cols` over the `(inputs + 1) x 17` weights (a
//!    `Mat` argument), `sum_k input[k] * w1[k][j]` per hidden unit `j`;
//! 2. the hidden units: a Map squashing the sums;
//! 3. the output units: an index Map over the hidden units and the hidden-to-output weights;
//! 4. the output deltas and 5. the hidden deltas: Maps with `Mat` and `&[f32]` arguments;
//! 6. and 7. the weight updates (Rodinia's `adjust_weights`): two-output Maps writing the
//!    new weights and the new momentum terms, from the previous ones (double-buffered).
//!
//! `cargo run --release --example skepu_backprop -- --backend cuda [--size N] [--check] [--bench]`
//! `--check` compares every backend's weights and units after [`STEPS`] steps (eager and
//! replayed as a recorded `skel::Graph`) with the plain sequential program. `--bench`
//! times a step (eager calls, the `skel::Graph` replay of a pair of steps), the same
//! program by hand with Rayon and the plain sequential loop, in one run.

use rayon::prelude::*;
use skel::prelude::*;

mod common;

/// Hidden units (each layer also has its bias unit 0).
pub const HIDDEN: usize = 16;
/// Output units.
pub const OUTPUTS: usize = 1;
/// Rodinia's learning rate and momentum.
pub const ETA: f32 = 0.3;
pub const MOMENTUM: f32 = 0.3;
/// Training steps of one run (even: a recorded graph holds a pair of steps, one per
/// buffer role).
pub const STEPS: usize = 10;

#[userfn]
fn squash(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// One term of a hidden unit's sum: input `k`'s value times its weight to unit `j`.
#[userfn]
fn weigh(#[index] (k, j): (usize, usize), x: f32, _unit: f32, w: Mat<f32>) -> f32 {
    x * w[(k, j)]
}

#[userfn]
fn add(a: f32, b: f32) -> f32 {
    a + b
}

/// A unit from its sum (the bias unit stays 1).
#[userfn]
fn activate(#[index] j: usize, sum: f32) -> f32 {
    if j == 0 {
        1.0
    } else {
        squash(sum)
    }
}

/// Output unit `k` from the hidden units and the hidden-to-output weights.
#[userfn]
fn output_unit(#[index] k: usize, w: Mat<f32>, hidden: &[f32]) -> f32 {
    if k == 0 {
        1.0
    } else {
        let mut sum = 0.0f32;
        for j in 0..hidden.len() {
            sum += w[(j, k)] * hidden[j];
        }
        squash(sum)
    }
}

#[userfn]
fn output_delta(#[index] k: usize, o: f32, t: f32) -> f32 {
    if k == 0 {
        0.0
    } else {
        o * (1.0 - o) * (t - o)
    }
}

#[userfn]
fn hidden_delta(#[index] j: usize, h: f32, w: Mat<f32>, delta: &[f32]) -> f32 {
    if j == 0 {
        0.0
    } else {
        let mut sum = 0.0f32;
        for k in 1..delta.len() {
            sum += delta[k] * w[(j, k)];
        }
        h * (1.0 - h) * sum
    }
}

/// Rodinia's `adjust_weights` for weight `(k, j)`: the new weight and momentum term.
#[userfn]
fn adjust(
    #[index] (k, j): (usize, usize),
    w: f32,
    dw: f32,
    delta: &[f32],
    unit: &[f32],
) -> (f32, f32) {
    if j == 0 {
        (w, dw)
    } else {
        let step = ETA * delta[j] * unit[k] + MOMENTUM * dw;
        (w + step, step)
    }
}

/// The weights and momentum terms of both layers.
#[derive(Clone)]
pub struct Weights {
    pub w1: Matrix<f32>,
    pub dw1: Matrix<f32>,
    pub w2: Matrix<f32>,
    pub dw2: Matrix<f32>,
}

/// The units and deltas a step computes.
pub struct Units {
    pub hidden_sum: Vector<f32>,
    pub hidden: Vector<f32>,
    pub output: Vector<f32>,
    pub delta_o: Vector<f32>,
    pub delta_h: Vector<f32>,
}

impl Units {
    fn new() -> Units {
        Units {
            hidden_sum: Vector::zeroed(HIDDEN + 1),
            hidden: Vector::zeroed(HIDDEN + 1),
            output: Vector::zeroed(OUTPUTS + 1),
            delta_o: Vector::zeroed(OUTPUTS + 1),
            delta_h: Vector::zeroed(HIDDEN + 1),
        }
    }
}

/// The network before training: `inputs` input units (plus the bias), weights in
/// `[-0.05, 0.05)`, no momentum, target 0.1.
pub struct Net {
    pub input: Vector<f32>,
    pub target: Vector<f32>,
    pub weights: Weights,
}

/// The network of `n` input units (deterministic).
pub fn inputs(n: usize) -> Net {
    let rows = n + 1;
    let mut input = common::data(rows, 11);
    input[0] = 1.0;
    let w1 = common::data(rows * (HIDDEN + 1), 12);
    let w2 = common::data((HIDDEN + 1) * (OUTPUTS + 1), 13);
    let scaled = |v: Vec<f32>| v.into_iter().map(|x| (x - 0.5) * 0.1).collect::<Vec<_>>();
    Net {
        input: Vector::from(input),
        target: Vector::from(vec![0.0, 0.1]),
        weights: Weights {
            w1: Matrix::from_vec(rows, HIDDEN + 1, scaled(w1)).expect("shape"),
            dw1: Matrix::zeroed(rows, HIDDEN + 1),
            w2: Matrix::from_vec(HIDDEN + 1, OUTPUTS + 1, scaled(w2)).expect("shape"),
            dw2: Matrix::zeroed(HIDDEN + 1, OUTPUTS + 1),
        },
    }
}

/// One training step on `backend`: the forward pass from `from`, the new weights into `to`.
pub fn step(
    backend: Backend,
    (input, target): (&Vector<f32>, &Vector<f32>),
    from: &Weights,
    to: &mut Weights,
    u: &mut Units,
) -> skel::Result<()> {
    MapPairsReduce::new(weigh, add)
        .arrays((&from.w1,))
        .backend(backend)
        .run_cols(input, &u.hidden, &mut u.hidden_sum)?;
    Map::new(activate)
        .backend(backend)
        .run(&u.hidden_sum, &mut u.hidden)?;
    Map::new(output_unit)
        .arrays((&from.w2, &u.hidden))
        .backend(backend)
        .run_index(&mut u.output)?;
    Map::new(output_delta)
        .backend(backend)
        .run(&u.output, target, &mut u.delta_o)?;
    Map::new(hidden_delta)
        .arrays((&from.w2, &u.delta_o))
        .backend(backend)
        .run(&u.hidden, &mut u.delta_h)?;
    Map::new(adjust)
        .arrays((&u.delta_o, &u.hidden))
        .backend(backend)
        .run(&from.w2, &from.dw2, &mut (&mut to.w2, &mut to.dw2))?;
    Map::new(adjust)
        .arrays((&u.delta_h, input))
        .backend(backend)
        .run(&from.w1, &from.dw1, &mut (&mut to.w1, &mut to.dw1))
}

/// Two steps: from `ws[0]` into `ws[1]` and back.
fn two_steps(
    backend: Backend,
    net: (&Vector<f32>, &Vector<f32>),
    ws: &mut [Weights; 2],
    u: &mut Units,
) -> skel::Result<()> {
    let [a, b] = ws;
    step(backend, net, a, b, u)?;
    step(backend, net, b, a, u)
}

/// What a run leaves: the weights, momentum terms and units, flattened.
fn flatten(w: &Weights, u: &Units) -> Vec<f64> {
    [
        u.hidden.to_vec(),
        u.output.to_vec(),
        w.w2.to_vec(),
        w.dw2.to_vec(),
        w.w1.to_vec(),
        w.dw1.to_vec(),
    ]
    .concat()
    .into_iter()
    .map(f64::from)
    .collect()
}

/// `steps` (even) training steps of `net` on `backend`, each call made eagerly.
pub fn compute(backend: Backend, net: &Net, steps: usize) -> skel::Result<Vec<f64>> {
    let mut ws = [net.weights.clone(), net.weights.clone()];
    let mut u = Units::new();
    for _ in 0..steps / 2 {
        two_steps(backend, (&net.input, &net.target), &mut ws, &mut u)?;
    }
    Ok(flatten(&ws[0], &u))
}

/// The same, a pair of steps recorded once as a [`skel::Graph`] and launched again.
pub fn compute_graph(backend: Backend, net: &Net, steps: usize) -> skel::Result<Vec<f64>> {
    let mut ws = [net.weights.clone(), net.weights.clone()];
    let mut u = Units::new();
    if steps >= 2 {
        let g =
            skel::Graph::record(|| two_steps(backend, (&net.input, &net.target), &mut ws, &mut u))?;
        for _ in 1..steps / 2 {
            g.launch()?;
        }
    }
    Ok(flatten(&ws[0], &u))
}

/// The plain sequential program (Rodinia's loops; the hidden sums a row of weights at a
/// time, which adds each column's terms in Rodinia's order).
pub struct Plain {
    pub input: Vec<f32>,
    pub target: Vec<f32>,
    pub w1: Vec<f32>,
    pub dw1: Vec<f32>,
    pub w2: Vec<f32>,
    pub dw2: Vec<f32>,
    pub hidden: Vec<f32>,
    pub output: Vec<f32>,
}

impl Plain {
    pub fn new(net: &Net) -> Plain {
        Plain {
            input: net.input.to_vec(),
            target: net.target.to_vec(),
            w1: net.weights.w1.to_vec(),
            dw1: net.weights.dw1.to_vec(),
            w2: net.weights.w2.to_vec(),
            dw2: net.weights.dw2.to_vec(),
            hidden: vec![0.0; HIDDEN + 1],
            output: vec![0.0; OUTPUTS + 1],
        }
    }

    /// One step; `parallel`: the hidden sums and the input weights' update by hand with
    /// Rayon (the sums in bands of rows, added band after band).
    // Rodinia's loops, index for index, so the reference reads like the original.
    #[allow(clippy::needless_range_loop)]
    pub fn step(&mut self, parallel: bool) {
        const H: usize = HIDDEN + 1;
        const O: usize = OUTPUTS + 1;
        let sums = if parallel {
            hidden_sums_rayon(&self.input, &self.w1)
        } else {
            hidden_sums(&self.input, &self.w1)
        };
        self.hidden[0] = 1.0;
        for j in 1..H {
            self.hidden[j] = squash::call(sums[j]);
        }
        self.output[0] = 1.0;
        for k in 1..O {
            let mut sum = 0.0f32;
            for j in 0..H {
                sum += self.w2[j * O + k] * self.hidden[j];
            }
            self.output[k] = squash::call(sum);
        }
        let mut delta_o = [0.0f32; O];
        for k in 1..O {
            let o = self.output[k];
            delta_o[k] = o * (1.0 - o) * (self.target[k] - o);
        }
        let mut delta_h = [0.0f32; H];
        for j in 1..H {
            let mut sum = 0.0f32;
            for k in 1..O {
                sum += delta_o[k] * self.w2[j * O + k];
            }
            let h = self.hidden[j];
            delta_h[j] = h * (1.0 - h) * sum;
        }
        adjust_rows(&mut self.w2, &mut self.dw2, &delta_o, &self.hidden, 0);
        if parallel {
            let band = 256;
            let input = &self.input;
            self.w1
                .par_chunks_mut(band * H)
                .zip(self.dw1.par_chunks_mut(band * H))
                .enumerate()
                .for_each(|(b, (w, dw))| adjust_rows(w, dw, &delta_h, input, b * band));
        } else {
            adjust_rows(&mut self.w1, &mut self.dw1, &delta_h, &self.input, 0);
        }
    }

    fn result(&self) -> Vec<f64> {
        [
            &self.hidden,
            &self.output,
            &self.w2,
            &self.dw2,
            &self.w1,
            &self.dw1,
        ]
        .into_iter()
        .flatten()
        .map(|&x| f64::from(x))
        .collect()
    }
}

/// `adjust_weights` on the rows of `w` and `dw` (`delta.len()` columns) that start at
/// row `first`, in place.
fn adjust_rows(w: &mut [f32], dw: &mut [f32], delta: &[f32], unit: &[f32], first: usize) {
    let cols = delta.len();
    for (r, (wr, dwr)) in w.chunks_mut(cols).zip(dw.chunks_mut(cols)).enumerate() {
        let u = unit[first + r];
        for j in 1..cols {
            let step = ETA * delta[j] * u + MOMENTUM * dwr[j];
            wr[j] += step;
            dwr[j] = step;
        }
    }
}

/// `sum_k input[k] * w1[k][j]` per column `j`, in row order.
fn hidden_sums(input: &[f32], w1: &[f32]) -> Vec<f32> {
    const H: usize = HIDDEN + 1;
    let mut acc = vec![0.0f32; H];
    for (k, row) in w1.chunks(H).enumerate() {
        for (a, &w) in acc.iter_mut().zip(row) {
            *a += input[k] * w;
        }
    }
    acc
}

/// The same in bands of rows on Rayon's threads, the bands' sums added in order.
fn hidden_sums_rayon(input: &[f32], w1: &[f32]) -> Vec<f32> {
    const H: usize = HIDDEN + 1;
    let rows = input.len();
    let band = rows.div_ceil(4 * rayon::current_num_threads()).max(1);
    w1.par_chunks(band * H)
        .zip(input.par_chunks(band))
        .map(|(w, x)| hidden_sums(x, w))
        .reduce(
            || vec![0.0f32; H],
            |mut a, b| {
                for (a, b) in a.iter_mut().zip(b) {
                    *a += b;
                }
                a
            },
        )
}

/// The plain sequential program's state after `steps` steps.
pub fn reference(net: &Net, steps: usize) -> Vec<f64> {
    let mut p = Plain::new(net);
    for _ in 0..steps {
        p.step(false);
    }
    p.result()
}

/// The program by hand with Rayon, after `steps` steps.
pub fn hand_rayon(net: &Net, steps: usize) -> Vec<f64> {
    let mut p = Plain::new(net);
    for _ in 0..steps {
        p.step(true);
    }
    p.result()
}

/// Seconds per training step: skel eager and replayed, by hand with Rayon, sequential.
fn timings(backend: Backend, n: usize) -> skel::Result<Vec<(String, f64)>> {
    let net = inputs(n);
    let per_step = |secs: f64| secs / STEPS as f64;
    let mut rows = Vec::new();
    {
        let mut ws = [net.weights.clone(), net.weights.clone()];
        let mut u = Units::new();
        let io = (&net.input, &net.target);
        let eager = common::best_of(|| {
            for _ in 0..STEPS / 2 {
                two_steps(backend, io, &mut ws, &mut u)?;
            }
            skel::tune::synchronize()
        })?;
        rows.push((
            format!("skel {backend} eager (7 calls a step)"),
            per_step(eager),
        ));
        let g = skel::Graph::record(|| two_steps(backend, io, &mut ws, &mut u))?;
        let replay = common::best_of(|| {
            for _ in 0..STEPS / 2 {
                g.launch()?;
            }
            skel::tune::synchronize()
        })?;
        let how = if g.device_graph() {
            "CUDA graph"
        } else {
            "closure"
        };
        rows.push((
            format!("skel {backend} Graph replay ({how}, 2 steps)"),
            per_step(replay),
        ));
    }
    let mut p = Plain::new(&net);
    let par = common::best_of(|| {
        for _ in 0..STEPS {
            p.step(true);
        }
        Ok(())
    })?;
    rows.push(("hand-written Rayon".into(), per_step(par)));
    let mut p = Plain::new(&net);
    let seq = common::best_of(|| {
        for _ in 0..STEPS {
            p.step(false);
        }
        Ok(())
    })?;
    rows.push(("sequential loop".into(), per_step(seq)));
    Ok(rows)
}

fn main() -> std::process::ExitCode {
    common::program_main(common::Program {
        name: "skepu_backprop",
        default_size: 1 << 18,
        forms: &[],
        results: &|backend, n| {
            let net = inputs(n);
            Ok(vec![
                (
                    format!("{STEPS} steps, eager"),
                    compute(backend, &net, STEPS)?,
                ),
                (
                    format!("{STEPS} steps, skel::Graph"),
                    compute_graph(backend, &net, STEPS)?,
                ),
            ])
        },
        reference: &|n| reference(&inputs(n), STEPS),
        tolerance: 1e-4,
        timings: &timings,
    })
}
